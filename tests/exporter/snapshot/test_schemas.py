"""The snapshot's shape in one place (exporter/snapshot/source.py): both schema files, the v3
sections and the histograms' keys come from it, and every field the metric catalogue reads is in
the schema of each version that promises its row."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from exporter import catalogue
from exporter.catalogue.model import Family, histogram_keys
from exporter.snapshot import schemas as snapshot_schema
from exporter.snapshot import source as schema_source
from tests.conftest import ROOT

ROWS = tuple(f for f in catalogue.FAMILIES if f.field is not None)


def versions(row: Family) -> tuple[int, ...]:
    """The schema versions a row belongs to: from the version that promised it on (an unpromised
    row: the newest only)."""
    since = row.promised.since if row.promised else max(snapshot_schema.SCHEMA_VERSIONS)
    return tuple(v for v in snapshot_schema.SCHEMA_VERSIONS if v >= since)


def _resolve(node: Any, defs: Mapping[str, Any]) -> Any:
    ref = node.get("$ref") if isinstance(node, dict) else None
    return defs[ref.removeprefix("#/$defs/")] if isinstance(ref, str) else node


def missing(row: Family, schema: Mapping[str, Any]) -> list[str]:
    """The parts of `row`'s field that `schema` lacks (each `<label>` value of its closed set, or
    any key where the schema takes any), and a histogram's count, sum and buckets keys."""
    assert row.field is not None
    defs = schema.get("$defs", {})
    found: list[str] = []
    nodes: list[tuple[str, Any]] = [("", schema)]
    for part in row.field.split("."):
        following = []
        for where, node in nodes:
            props = node.get("properties", {})
            if part.startswith("<"):
                closed = row.values.get(part[1:-1])
                extra = node.get("additionalProperties")
                if isinstance(extra, dict):
                    names = node.get("propertyNames", {}).get("enum")
                    found += [f"{where}{part[1:-1]}={v}" for v in closed or () if names
                              and v not in names]
                    following.append((f"{where}{part}.", _resolve(extra, defs)))
                    continue
                for value in closed or ():
                    if value in props:
                        following.append((f"{where}{value}.", _resolve(props[value], defs)))
                    else:
                        found.append(f"{where}{value}")
            elif part in props:
                following.append((f"{where}{part}.", _resolve(props[part], defs)))
            else:
                found.append(f"{where}{part}")
        nodes = following
    for where, node in nodes:
        if row.type == "histogram":
            found += [f"{where}{k}" for k in histogram_keys(row.field)
                      if k not in node.get("properties", {})]
        elif node.get("type") not in ("integer", "number"):
            found.append(f"{where.rstrip('.')} (not a number)")
    return found


def catalogue_problems(source: Mapping[str, Any] = schema_source.SOURCE) -> list[str]:
    """One line per catalogue row whose field a version's schema (built from `source`) lacks."""
    problems = []
    for row in ROWS:
        for version in versions(row):
            gaps = missing(row, snapshot_schema.schema(version, source))
            if gaps:
                problems.append(f"catalogue row {row.name} (field {row.field}): schema {version} "
                                f"has no {', '.join(gaps)}")
    return problems


def test_every_catalogue_field_is_in_the_schema_of_its_versions() -> None:
    assert len(ROWS) >= 20
    problems = catalogue_problems()
    assert problems == [], "\n".join(problems)


def _without_field(source: dict[str, Any], row: Family) -> str:
    """Remove, in `source`, the last named property on `row`'s path (a `<label>` of named
    properties: its first value); the dotted name of what was removed."""
    assert row.field is not None

    def unwrap(node: Any) -> Any:
        return node.value if isinstance(node, schema_source.Since) else node

    defs = {k: unwrap(v) for k, v in source["$defs"].items()}
    node, last = source, None
    for part in row.field.split("."):
        node = _resolve(unwrap(node), defs)
        props = node.get("properties", {})
        name = part
        if part.startswith("<"):
            closed = row.values.get(part[1:-1]) or ()
            if not closed or closed[0] not in props:  # any key (additionalProperties): stop here
                break
            name = closed[0]
        last = (props, name)
        node = props[name]
    assert last is not None
    props, name = last
    del props[name]
    return name


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_removing_a_field_from_the_source_names_the_row(row: Family) -> None:
    source = copy.deepcopy(schema_source.SOURCE)
    removed = _without_field(source, row)
    problems = catalogue_problems(source)
    named = [p for p in problems if p.startswith(f"catalogue row {row.name} ")]
    assert named, f"removing {removed} failed nothing for {row.name}:\n" + "\n".join(problems)
    assert all(removed in p for p in named)
    assert {p.split(": schema ")[1].split()[0] for p in named} == set(map(str, versions(row)))


def test_a_histogram_without_its_sum_names_the_row() -> None:
    source = copy.deepcopy(schema_source.SOURCE)
    del source["$defs"]["histogram"].value["properties"]["sum"]
    problems = catalogue_problems(source)
    assert any(p.startswith("catalogue row helios_offload_eviction_age_seconds ") and
               "age_seconds.sum" in p for p in problems), problems


def test_the_schema_files_are_written_from_the_source() -> None:
    for version in snapshot_schema.SCHEMA_VERSIONS:
        path = ROOT / "exporter" / "schema" / f"snapshot-v{version}.schema.json"
        assert path.read_text(encoding="utf-8") == snapshot_schema.text(version), path


def test_v3_is_v1_and_its_additions() -> None:
    """Each addition is in schema 3 and not in schema 1; the rest of schema 1 is schema 3's."""
    v1, v3 = snapshot_schema.schema(1), snapshot_schema.schema(3)
    additions = snapshot_schema.additions(3)
    assert "offload.geometry" in additions and "identity.engine" in additions

    def has(schema: Mapping[str, Any], path: str) -> bool:
        node: Any = schema
        for part in path.split("."):
            node = _resolve(node, schema["$defs"]).get("properties", {})
            if part not in node:
                return False
            node = node[part]
        return True

    for path in additions:
        assert has(v3, path) and not has(v1, path), path
    v1_only = {k: v for k, v in v1["$defs"].items() if v3["$defs"].get(k) != v}
    assert set(v1_only) == {"evictions"}  # v3 adds the histograms (and says so)
    assert v1["properties"]["schema_version"] == {"const": 1}
    assert v3["properties"]["schema_version"] == {"const": 3}


def test_the_v3_sections_and_histograms_are_derived() -> None:
    """A field marked V3 in the source is a v3 section, left out of schema 1; a histogram is
    found by its buckets."""
    assert set(snapshot_schema.V3_SECTIONS) <= set(snapshot_schema.additions(3))
    assert all(p.startswith("offload.") for p in snapshot_schema.V3_SECTIONS)
    assert snapshot_schema.HISTOGRAM_KEYS["offload.host.restore_transfers"] == (
        "count", "seconds_sum", "seconds_buckets")
    assert snapshot_schema.HISTOGRAM_KEYS["offload.evictions.page.idle_seconds"] == (
        "count", "sum", "buckets")
    source = copy.deepcopy(schema_source.SOURCE)
    host = source["properties"]["offload"]["properties"]["host"]["properties"]
    host["store_retries"] = schema_source.V3({"$ref": "#/$defs/count"})
    host["retry_seconds"] = schema_source.V3({"type": "object", "properties": {
        "count": {"$ref": "#/$defs/count"}, "total_sum": {"$ref": "#/$defs/seconds"},
        "total_buckets": {"$ref": "#/$defs/buckets"}}})
    assert "offload.host.store_retries" in snapshot_schema.additions(3, source)
    assert "store_retries" not in str(snapshot_schema.schema(1, source))
    assert "store_retries" in str(snapshot_schema.schema(3, source))
    assert snapshot_schema.histogram_keys(source)["offload.host.retry_seconds"] == (
        "count", "total_sum", "total_buckets")


def test_a_v1_field_marked_v3_names_its_row_for_schema_1() -> None:
    """A row promised since interface 1 needs its field in schema 1 too."""
    source = copy.deepcopy(schema_source.SOURCE)
    lookups = source["properties"]["offload"]["properties"]["lookups"]["properties"]
    lookups["hits"] = schema_source.V3(lookups["hits"])
    assert catalogue_problems(source) == [
        "catalogue row helios_offload_lookup_hits_total (field offload.lookups.hits): schema 1 "
        "has no offload.lookups.hits"]
