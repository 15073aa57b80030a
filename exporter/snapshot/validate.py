"""Validating a decoded snapshot (`validated`, the step between decoding and building in
parse.py): the compiled JSON Schema validator of each version, and the checks beside it that the
schema cannot make, or makes too slowly. Each raises `SnapshotError` naming the field, or leaves
out and names what it drops (schema 3's broken additions through v3.py)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jsonschema

from exporter.labels import IDENTITY_FIELDS, ErrorReason
from exporter.snapshot import schemas
from exporter.snapshot.model import SnapshotError
from exporter.snapshot.v3 import V3_PATHS, drop_broken_additions, without


def validated(obj: Any) -> tuple[dict[str, Any], int, tuple[str, ...]]:
    """`obj` as the schema of its `schema_version` holds it, that version, and the fields left
    out of it (unusable identity strings, broken v3 additions); SnapshotError when it is not a
    snapshot this sidecar reads."""
    version = 1
    if isinstance(obj, dict) and "schema_version" in obj:
        raw = obj["schema_version"]
        # true equals 1 in Python, not in JSON: the schema refuses it (a `schema` error).
        if not isinstance(raw, bool) and raw not in schemas.SCHEMA_VERSIONS:
            shown = raw if isinstance(raw, int) and not isinstance(raw, bool) else "?"
            raise SnapshotError(
                ErrorReason.UNSUPPORTED_VERSION,
                f"schema_version {shown} is not supported (this sidecar reads 1 and 3)",
                "schema_version",
            )
        version = 3 if raw == 3 else 1  # true (== 1) is read as 1 and refused
    obj, dropped = drop_unusable_identity(obj)
    valid = False
    if version == 3:
        errors = (tuple(e.absolute_path) for e in validator(3).iter_errors(check_misses(obj)))
        obj, broken, valid = drop_broken_additions(obj, errors)
        dropped += broken
    else:
        obj = without(obj, V3_PATHS)  # unknown fields to schema 1
    error = None if valid else jsonschema.exceptions.best_match(
        validator(version).iter_errors(check_misses(obj)))
    if error is not None:
        # The message can echo input; keep it short, it goes to logs and /status only.
        path = ".".join(str(p) for p in error.absolute_path)
        raise SnapshotError(ErrorReason.SCHEMA, error.message[:200], path)
    check_anchored(obj)
    return obj, version, dropped


@cache
def schema(version: int = 1) -> dict[str, Any]:
    """The JSON Schema of snapshot `version` (1 or 3): the package's exporter/schema/ files hold
    the same, written from the same source."""
    return schemas.schema(version)


@cache
def validator(version: int = 1) -> jsonschema.Draft202012Validator:
    # The shipped schema keeps its `$defs` for readers; the validator gets them inlined, since
    # resolving a `$ref` costs more than checking what it points to (half of a poll's CPU).
    shipped = schema(version)
    return jsonschema.Draft202012Validator(_inline_refs(shipped, shipped.get("$defs", {})))


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


@cache
def _label_re() -> re.Pattern[str]:
    """The schema's label-value pattern, for a full (anchored) match."""
    pattern: str = schema()["$defs"]["label"]["pattern"]
    return re.compile(pattern.removeprefix("^").removesuffix("$"))


def label_value_ok(text: str) -> bool:
    """Whether `text` is what the schema accepts for an identity field (a usable label value)."""
    return _label_re().fullmatch(text) is not None


def max_ranks() -> int:
    """The most entries a snapshot's `ranks` may list (the schema's maxItems)."""
    limit: int = schema()["properties"]["ranks"]["maxItems"]
    return limit


def drop_unusable_identity(obj: Any) -> tuple[Any, tuple[str, ...]]:
    """Identity strings are descriptive: one that cannot be a label value (a space, a quote, an
    empty or overlong string) is left out and reported, instead of failing the snapshot; a
    failed snapshot would read as an unreachable engine and open a restore window."""
    if not isinstance(obj, dict) or not isinstance(ident := obj.get("identity"), dict):
        return obj, ()
    # (v3) identity.engine is descriptive too: dropped and counted (exported once it was, like
    # a v3 section), never a reason to refuse the snapshot.
    dropped = tuple(
        f"identity.{k}" for k in (*IDENTITY_FIELDS, "engine")
        if k in ident and not (isinstance(ident[k], str) and _label_re().fullmatch(ident[k]))
    )
    if not dropped:
        return obj, ()
    keep = {k: v for k, v in ident.items() if f"identity.{k}" not in dropped}
    return {**obj, "identity": keep}, dropped


MAX_COUNT = 2**53 - 1


def _is_count(value: Any) -> bool:
    # What the schema's `count` accepts: an integer (2.0 included, as in JSON Schema), in range.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not value.is_integer():
        return False
    return 0 <= value <= MAX_COUNT


def check_misses(obj: Any) -> Any:
    """Validate `offload.lookups.misses` by hand; return `obj` with it emptied for jsonschema.

    The engine chooses how many keys it sends, and jsonschema spends ~50 µs per key on the
    `$ref` of every value: 10000 keys cost half a second and a 5 MB body a dozen seconds per
    poll. The same rules (at most `maxProperties` keys, every value a count), checked here with
    the key count first, cost a few milliseconds.
    """
    try:
        misses = obj["offload"]["lookups"]["misses"]
    except (KeyError, TypeError, IndexError):
        return obj
    if not isinstance(misses, dict):
        return obj  # a wrong type: jsonschema reports it
    path = "offload.lookups.misses"
    limit = schema()["properties"]["offload"]["properties"]["lookups"]["properties"]["misses"][
        "maxProperties"
    ]
    if len(misses) > limit:
        raise SnapshotError(ErrorReason.SCHEMA, f"{len(misses)} keys, more than {limit}", path)
    for key, value in misses.items():
        if not _is_count(value):
            raise SnapshotError(ErrorReason.SCHEMA, f"{str(value)[:40]!r} is not a count",
                                f"{path}.{key[:64]}")
    lookups = {**obj["offload"]["lookups"], "misses": {}}
    return {**obj, "offload": {**obj["offload"], "lookups": lookups}}


def check_anchored(obj: dict[str, Any]) -> None:
    """Re-check the patterns of the strings that become label values, anchored at both ends.

    jsonschema matches `pattern` with `re.search`, whose `$` also matches before a final
    newline: `"g-1\\n"` passes `^[A-Za-z0-9._:-]{1,64}$`. A label value must not end in one.
    """
    fields: list[tuple[str, Any]] = [("generation", obj.get("generation"))]
    ranks = obj.get("ranks") or []
    fields += [(f"ranks.{i}.gpu_uuid", r.get("gpu_uuid")) for i, r in enumerate(ranks)]
    for path, value in fields:
        if isinstance(value, str) and value.endswith("\n"):
            raise SnapshotError(ErrorReason.SCHEMA, "must not end in a newline", path)
