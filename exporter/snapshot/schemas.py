"""Each snapshot version's JSON Schema, its file, and the facts derived from the one source
(exporter/snapshot/source.py): the v3 sections and the histograms with their keys."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from exporter.snapshot.source import DESCRIPTION, SCHEMA_VERSIONS, SOURCE, VERSION, Since

__all__ = ["HISTOGRAM_KEYS", "SCHEMA_VERSIONS", "V3_SECTIONS", "additions", "histogram_keys",
           "schema", "text"]


def _select(node: Any, version: int) -> Any:
    if isinstance(node, Since):
        raise AssertionError("a Since is a value of an object's key")
    if node is VERSION:
        return version
    if isinstance(node, dict):
        return {k: _select(v.value if isinstance(v, Since) else v, version)
                for k, v in node.items() if not (isinstance(v, Since) and v.version > version)}
    if isinstance(node, list):
        return [_select(v, version) for v in node]
    return node


def schema(version: int, source: Mapping[str, Any] = SOURCE) -> dict[str, Any]:
    """Snapshot schema `version` (one of SCHEMA_VERSIONS) from `source`: a new object each call."""
    if version not in SCHEMA_VERSIONS:
        raise ValueError(f"no snapshot schema {version}; there are {SCHEMA_VERSIONS}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://helios.example/schemas/offload-snapshot-v{version}.json",
        "title": f"Helios engine offload snapshot, schema_version {version}",
        "description": DESCRIPTION[version],
        **_select(dict(source), version),
    }


def text(version: int, source: Mapping[str, Any] = SOURCE) -> str:
    """The schema file of `version`: two-space JSON, an object or list on one line when it fits
    110 columns (or holds only numbers and strings) and has no description."""

    def one_line(value: Any) -> str:
        if isinstance(value, dict):
            return "{" + ", ".join(f"{json.dumps(k)}: {one_line(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(one_line(v) for v in value) + "]"
        return json.dumps(value, ensure_ascii=False)

    def flat(value: Any) -> bool:
        return not isinstance(value, dict | list) or (
            isinstance(value, list) and not any(isinstance(v, dict | list) for v in value))

    def lines(value: Any, pad: str, head: str, tail: str) -> Iterator[str]:
        line = pad + head + one_line(value) + tail
        if flat(value) or (isinstance(value, dict) and "description" not in value and (
                len(line) <= 110 or all(flat(v) for v in value.values()))):
            yield line
            return
        items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
        yield pad + head + ("{" if isinstance(value, dict) else "[")
        for i, (key, child) in enumerate(items):
            name = "" if key is None else f"{json.dumps(key)}: "
            yield from lines(child, pad + "  ", name, "," if i < len(items) - 1 else "")
        yield pad + ("}" if isinstance(value, dict) else "]") + tail

    return "\n".join(lines(schema(version, source), "", "", "")) + "\n"


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    return defs[ref.removeprefix("#/$defs/")] if isinstance(ref, str) else node


def _fields(source: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], int]]:
    """Every named field of the newest schema, depth first in the source's order: its dotted
    path, its (resolved) schema and the version that added it (a definition's addition counts
    wherever the definition is used)."""
    defs = {k: v.value if isinstance(v, Since) else v for k, v in source["$defs"].items()}

    Field = tuple[str, Mapping[str, Any], int]

    def walk(props: Mapping[str, Any], prefix: str, since: int) -> Iterator[Field]:
        for name, raw in props.items():
            added = max(since, raw.version if isinstance(raw, Since) else 1)
            node = _resolve(raw.value if isinstance(raw, Since) else raw, defs)
            yield f"{prefix}{name}", node, added
            if isinstance(node.get("properties"), dict):
                yield from walk(node["properties"], f"{prefix}{name}.", added)

    yield from walk(source["properties"], "", 1)


def additions(version: int, source: Mapping[str, Any] = SOURCE) -> tuple[str, ...]:
    """The fields schema `version` added (their paths; not the fields inside them)."""
    found = [(p, v) for p, _, v in _fields(source) if v == version]
    return tuple(p for p, _ in found if not any(p.startswith(q + ".") for q, _ in found))


def histogram_keys(source: Mapping[str, Any] = SOURCE) -> dict[str, tuple[str, str, str]]:
    """Every histogram object (path -> its count, sum and buckets keys): an object with a
    property of the `buckets` definition, `<x>buckets` beside `<x>sum` and `count`."""
    out = {}
    for path, node, _ in _fields(source):
        props = node.get("properties") or {}
        buckets = [k for k, v in props.items()
                   if (v.value if isinstance(v, Since) else v) == {"$ref": "#/$defs/buckets"}]
        if buckets:
            (key,) = buckets
            out[path] = ("count", key.removesuffix("buckets") + "sum", key)
    return out


# The v3 sections: schema 3's additions to `offload`, each read, and dropped when it breaks
# the schema, as a whole (exporter/snapshot/v3.py).
V3_SECTIONS: Final = tuple(p for p in additions(3) if p.startswith("offload."))
HISTOGRAM_KEYS: Final = histogram_keys()
