"""Snapshot schema v3 (exporter/schema/snapshot-v3.schema.json): schema v1 and more, its fixtures,
and the invariants checker (tests/snapshot_v3.py) that docs/snapshot.md promises."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from exporter.labels import MISS_REASONS
from tests.conftest import FIXTURES, ROOT
from tests.snapshot_v3 import V3_FIELDS, strip_v3, violations

SCHEMAS = ROOT / "exporter" / "schema"
SNAPSHOTS = FIXTURES / "snapshots"
V3_FIXTURES = ("contract_example_v3.json", "simulator_tour_v3.json", "simulator_inert_v3.json")
def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / name).read_text())
    return loaded


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SNAPSHOTS / name).read_text())
    return loaded


V1 = load("snapshot-v1.schema.json")
V3 = load("snapshot-v3.schema.json")
VALIDATOR = jsonschema.Draft202012Validator(V3)


def errors(obj: Any) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(obj)]


def without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [without_descriptions(v) for v in node]
    return node


def test_the_schema_is_draft_2020_12_for_schema_version_3() -> None:
    jsonschema.Draft202012Validator.check_schema(V3)
    assert V3["properties"]["schema_version"] == {"const": 3}
    assert V3["$id"].endswith("offload-snapshot-v3.json")


def test_v3_keeps_every_v1_rule() -> None:
    """Each v1 property and definition is in v3 unchanged (bounds, patterns, required fields);
    v3 only adds properties, definitions and descriptions."""

    def contains(old: Any, new: Any, where: str) -> None:
        if isinstance(old, dict):
            assert isinstance(new, dict), where
            for key, value in old.items():
                if key == "properties" or key == "$defs":
                    for name, sub in value.items():
                        assert name in new[key], f"{where}.{key}.{name} is gone"
                        contains(sub, new[key][name], f"{where}.{name}")
                else:
                    assert new.get(key) == value, f"{where}.{key}: {new.get(key)!r} != {value!r}"
        else:
            assert old == new, where

    v1, v3 = without_descriptions(V1), without_descriptions(V3)
    v1["properties"].pop("schema_version")
    for key in ("$id", "title"):
        v1.pop(key)
    contains(v1, v3, "schema")


def test_every_ref_stands_alone() -> None:
    """A `$ref` with a sibling keyword is not inlined by the sidecar's validator, which drops
    `$defs` (exporter/snapshot/validate.py): descriptions go on the object that holds the refs."""

    def walk(node: Any, where: str) -> list[str]:
        if isinstance(node, dict):
            bad = [where] if "$ref" in node and len(node) != 1 else []
            return bad + [b for k, v in node.items() for b in walk(v, f"{where}.{k}")]
        if isinstance(node, list):
            return [b for i, v in enumerate(node) for b in walk(v, f"{where}.{i}")]
        return []

    assert walk(V3, "schema") == []


def test_blocked_tokens_reasons_are_the_closed_miss_reasons() -> None:
    lookups = V3["properties"]["offload"]["properties"]["lookups"]["properties"]
    assert tuple(lookups["blocked_tokens"]["propertyNames"]["enum"]) == MISS_REASONS


@pytest.mark.parametrize("name", V3_FIXTURES)
def test_v3_fixtures_validate_and_keep_every_invariant(name: str) -> None:
    snap = fixture(name)
    assert errors(snap) == []
    assert violations(snap) == []
    for path in V3_FIELDS:  # every v3 field is there
        node: Any = snap["offload"]
        for key in path:
            node = node["row"] if key == "*" else node[key]


def test_contract_example_v3_is_the_v1_example_plus_the_v3_fields() -> None:
    v1 = fixture("contract_example.json")
    jsonschema.Draft202012Validator(V1).validate(v1)
    assert strip_v3(fixture("contract_example_v3.json")) == v1


def test_the_simulator_tour_has_every_v3_figure_non_zero() -> None:
    snap = fixture("simulator_tour_v3.json")
    off = snap["offload"]

    def figures(node: Any, where: str) -> list[tuple[str, Any]]:
        if isinstance(node, dict):
            return [f for k, v in node.items() if k != "buckets" and k != "seconds_buckets"
                    for f in figures(v, f"{where}.{k}")]
        return [(where, node)]

    values = [f for path in V3_FIELDS if path[0] != "lookups"
              for pressure in ("row", "page")
              for f in figures(_at(off, path, pressure), ".".join(path).replace("*", pressure))]
    values += figures(off["lookups"]["evicted_by"], "lookups.evicted_by")
    assert [where for where, value in values if not value] == []
    assert set(off["lookups"]["blocked_tokens"]) >= {"no_prefix", "evicted", "too_short"}


def _at(off: dict[str, Any], path: tuple[str, ...], pressure: str) -> Any:
    node: Any = off
    for key in path:
        node = node[pressure if key == "*" else key]
    return node


def test_the_inert_capture_cannot_hit() -> None:
    lookups = fixture("simulator_inert_v3.json")["offload"]["lookups"]
    assert lookups["hits"] == 0 and lookups["total"] > 100
    assert lookups["misses"]["no_prefix"] == 1  # the very first long prompt: nothing stored yet
    assert set(lookups["misses"]) == {"no_prefix", "too_short", "no_checkpoint"}


def test_a_v3_engine_may_send_no_v3_field() -> None:
    snap = strip_v3(fixture("simulator_tour_v3.json"))
    snap["schema_version"] = 3
    assert errors(snap) == []
    assert violations(snap) == []


@pytest.mark.parametrize(("break_it", "where"), [
    (lambda o: o.__setitem__("schema_version", 1), "schema_version"),
    (lambda o: o["offload"]["host"]["store_outcomes"].pop("failed"), "offload.host.store_outcomes"),
    (lambda o: o["offload"]["host"]["restore_transfers"]["seconds_buckets"].pop("+Inf"),
     "offload.host.restore_transfers.seconds_buckets"),
    (lambda o: o["offload"]["evictions"]["row"]["age_seconds"]["buckets"].__setitem__("1s", 0),
     "offload.evictions.row.age_seconds.buckets"),
    (lambda o: o["offload"]["evictions"]["page"]["idle_seconds"].__setitem__("sum", -1.0),
     "offload.evictions.page.idle_seconds.sum"),
    (lambda o: o["offload"]["lookups"]["blocked_tokens"].__setitem__("key_mismatch:ckpt=ab12", 3),
     "offload.lookups.blocked_tokens"),
    (lambda o: o["offload"]["lookups"]["evicted_by"].pop("ancestor_compaction"),
     "offload.lookups.evicted_by"),
    (lambda o: o["offload"]["geometry"].__setitem__("page_tokens", 0), "offload.geometry.page_tokens"),
    (lambda o: o["offload"]["prompt_tokens"].pop("gpu_prefix"), "offload.prompt_tokens"),
    (lambda o: o["offload"]["host"].__setitem__("stored_bytes", 1.5), "offload.host.stored_bytes"),
    (lambda o: o["offload"]["host"]["restore_transfers"]["seconds_buckets"].update(
        {f"{i}.5": 0 for i in range(40)}), "offload.host.restore_transfers.seconds_buckets"),
])
def test_the_schema_refuses(break_it: Callable[[dict[str, Any]], Any], where: str) -> None:
    snap = fixture("simulator_tour_v3.json")
    break_it(snap)
    assert [e for e in errors(snap) if e.startswith(where + ":")], errors(snap)


def _shift_bucket(o: dict[str, Any]) -> None:
    buckets = o["offload"]["evictions"]["row"]["age_seconds"]["buckets"]
    buckets["600.0"] = buckets["60.0"] - 1


# Each invariant of docs/snapshot.md broken on its own: the checker says which.
BROKEN: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("1 +Inf", lambda o: o["offload"]["host"]["restore_transfers"]["seconds_buckets"].__setitem__(
        "+Inf", 0), "+Inf 0 != count"),
    ("1 cumulative", _shift_bucket, "below bucket"),
    ("1 empty sum", lambda o: o["offload"]["evictions"]["page"]["idle_seconds"].update(
        {"count": 0, "buckets": dict.fromkeys(o["offload"]["evictions"]["page"]["idle_seconds"]
                                              ["buckets"], 0)}), "with count 0"),
    ("2", lambda o: o["offload"]["evictions"]["row"].__setitem__("evicted", 1), "!= evicted"),
    ("3 count", lambda o: o["offload"]["evictions"]["page"]["idle_seconds"].__setitem__(
        "count", 10**6), "idle_seconds.count"),
    ("3 sum", lambda o: o["offload"]["evictions"]["row"]["idle_seconds"].__setitem__(
        "sum", 10.0**9), "idle_seconds.sum"),
    ("4", lambda o: o["offload"]["host"].__setitem__("stores", 1), "!= stores"),
    ("5 hits", lambda o: o["offload"]["lookups"].__setitem__("hits", 1), "> lookups.hits"),
    ("5 tokens", lambda o: o["offload"]["host"].__setitem__("tokens_restored", 0),
     "with tokens_restored 0"),
    ("6 restored", lambda o: o["offload"]["prompt_tokens"].__setitem__("host_restored", 1),
     "!= host.tokens_restored"),
    ("6 reused", lambda o: o["offload"]["prompt_tokens"].__setitem__("gpu_prefix", 1),
     "!= host.prompt_tokens_reused"),
    ("7 reason", lambda o: o["offload"]["lookups"]["blocked_tokens"].__setitem__("other", 5),
     "tokens, no miss"),
    ("7 sum", lambda o: o["offload"]["prompt_tokens"].__setitem__("computed", 1),
     "> prompt_tokens.computed"),
    ("7 too_short", lambda o: o["offload"]["geometry"].__setitem__("min_reusable_tokens", 2),
     "misses x 1 tokens"),
    ("8", lambda o: o["offload"]["lookups"]["evicted_by"].__setitem__("page", 0),
     "!= evicted misses"),
    ("9", lambda o: o["offload"]["geometry"].__setitem__("row_checkpoint_interval_tokens", 65),
     "min_reusable_tokens 65 not above"),
]


@pytest.mark.parametrize(("rule", "break_it", "said"), BROKEN, ids=[b[0] for b in BROKEN])
def test_the_checker_finds_each_broken_invariant(
    rule: str, break_it: Callable[[dict[str, Any]], Any], said: str
) -> None:
    snap = fixture("simulator_tour_v3.json")
    break_it(snap)
    found = violations(snap)
    assert [v for v in found if said in v], (rule, found)


def test_docs_show_the_shipped_v3_schema() -> None:
    doc = (ROOT / "docs" / "snapshot.md").read_text()
    shipped = (SCHEMAS / "snapshot-v3.schema.json").read_text()
    assert "```json\n" + shipped + "```" in doc, "docs/snapshot.md drifted from the v3 schema"
    for path in V3_FIELDS:  # each field has its line in the v3 section
        assert f"`{'.'.join(k for k in path if k != '*')}" in doc.split("## Schema v3")[1] or \
            f"`{path[-1]}`" in doc.split("## Schema v3")[1], path
