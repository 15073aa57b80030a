"""The sidecar's reading of snapshot schema 3: every addition exported from its field, a broken
addition left out (and named) without failing the snapshot, histograms bounded in buckets."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter import catalogue
from exporter.catalogue.model import kept_bounds
from exporter.collectors.offload import _offload
from exporter.labels import ErrorReason
from exporter.snapshot.model import SnapshotError
from exporter.snapshot.parse import snapshot_from_obj
from exporter.snapshot.schemas import V3_SECTIONS
from exporter.snapshot.validate import label_value_ok
from tests.conftest import FIXTURES
from tests.snapshot_v3 import series

SNAPSHOTS = FIXTURES / "snapshots"
V3_FAMILIES = tuple(r.name for r in catalogue.offload_rows()
                    if r.promised is not None and r.promised.since == 3)
# The series a v3 engine with every field adds, from the catalogue (tests/e2e holds a live
# sidecar to the same count).
V3_SERIES = sum(series(r) for r in catalogue.offload_rows() if r.name in V3_FAMILIES)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SNAPSHOTS / name).read_text())
    return data


def exposition(obj: dict[str, Any]) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """{sample name: {labels without generation: value}} of the offload rows."""
    snap = snapshot_from_obj(obj)
    assert snap.offload is not None

    class Offload:
        def collect(self) -> Any:
            yield from _offload(snap.generation, snap.offload, None, None)

    registry = CollectorRegistry()
    registry.register(Offload())
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            assert s.labels["generation"] == snap.generation
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "generation"))
            out.setdefault(s.name, {})[key] = s.value
    return out


def test_every_v3_family_exports_all_its_series_with_every_field() -> None:
    """The contract example has every v3 field: each v3 row exports every series its closed
    label sets and kept buckets allow (docs/scale.md's series per engine)."""
    got = exposition(load("contract_example_v3.json"))
    names = {n for n in got if any(n.startswith(f) for f in V3_FAMILIES)}
    rows = [r for r in catalogue.offload_rows() if r.name in V3_FAMILIES]
    assert sum(len(got[n]) for n in names) == V3_SERIES == sum(series(r) for r in rows)


@pytest.mark.parametrize("name", ["contract_example_v3.json", "simulator_tour_v3.json",
                                  "simulator_inert_v3.json"])
def test_every_v3_number_is_exported_from_its_field(name: str) -> None:
    obj = load(name)
    off = obj["offload"]
    got = exposition(obj)
    for outcome, n in off["host"]["store_outcomes"].items():
        assert got["helios_offload_host_store_outcomes_total"][(("outcome", outcome),)] == n
    assert got["helios_offload_host_stored_bytes_total"][()] == off["host"]["stored_bytes"]
    rt = off["host"]["restore_transfers"]
    assert got["helios_offload_host_restore_transfer_bytes_total"][()] == rt["bytes"]
    assert got["helios_offload_host_restore_transfer_seconds_count"][()] == rt["count"]
    assert got["helios_offload_host_restore_transfer_seconds_sum"][()] == rt["seconds_sum"]
    for le, n in rt["seconds_buckets"].items():
        shown = "+Inf" if le == "+Inf" else repr(float(le))
        assert got["helios_offload_host_restore_transfer_seconds_bucket"][(("le", shown),)] == n
    for pressure, ev in off["evictions"].items():
        for hist in ("age", "idle"):
            h = ev[f"{hist}_seconds"]
            fam = f"helios_offload_eviction_{hist}_seconds"
            assert got[f"{fam}_count"][(("pressure", pressure),)] == h["count"]
            assert got[f"{fam}_sum"][(("pressure", pressure),)] == h["sum"]
            for le, n in h["buckets"].items():
                shown = "+Inf" if le == "+Inf" else repr(float(le))
                assert got[f"{fam}_bucket"][(("le", shown), ("pressure", pressure))] == n
    blocked = got["helios_offload_lookup_blocked_tokens_total"]
    assert len(blocked) == 7  # every reason of the closed set, 0 where the engine sent none
    for labels, n in blocked.items():
        assert n == off["lookups"]["blocked_tokens"].get(dict(labels)["reason"], 0)
    for by, n in off["lookups"]["evicted_by"].items():
        assert got["helios_offload_lookup_evicted_misses_total"][(("evicted_by", by),)] == n
    for source, n in off["prompt_tokens"].items():
        assert got["helios_offload_prompt_tokens_total"][(("source", source),)] == n
    for field, n in off["geometry"].items():
        assert got[f"helios_offload_geometry_{field}"][()] == n


def test_a_schema_1_snapshot_has_none_of_them() -> None:
    v1 = {**load("contract_example_v3.json"), "schema_version": 1}
    got = exposition(v1)
    assert not [n for n in got if any(n.startswith(f) for f in V3_FAMILIES)]
    assert snapshot_from_obj(v1).dropped_fields == ()
    assert exposition(load("contract_example.json")) == got


def test_a_v3_snapshot_without_its_additions_is_a_v1_one() -> None:
    obj = {**load("contract_example.json"), "schema_version": 3}
    snap = snapshot_from_obj(obj)
    assert snap.schema_version == 3 and snap.dropped_fields == ()
    assert exposition(obj) == exposition(load("contract_example.json"))


@pytest.mark.parametrize("version", [0, 2, 4, "3", 3.5])
def test_other_schema_versions_are_refused(version: Any) -> None:
    with pytest.raises(SnapshotError) as err:
        snapshot_from_obj({**load("contract_example_v3.json"), "schema_version": version})
    assert err.value.reason == ErrorReason.UNSUPPORTED_VERSION


def test_true_is_not_a_version_but_a_schema_error() -> None:
    with pytest.raises(SnapshotError) as err:
        snapshot_from_obj({**load("contract_example_v3.json"), "schema_version": True})
    assert err.value.reason == ErrorReason.SCHEMA


def _section(obj: dict[str, Any], path: str) -> dict[str, Any]:
    node = obj
    for part in path.split(".")[:-1]:
        node = node[part]
    return node


# One way to break each addition against the schema; one not named here gets a string where
# the schema wants a number or an object.
BREAK: dict[str, Callable[[Any], Any]] = {
    "offload.host.store_outcomes": lambda v: {**v, "dropped_full": -1},
    "offload.host.restore_transfers": lambda v: {k: x for k, x in v.items() if k != "bytes"},
    "offload.lookups.blocked_tokens": lambda v: {**v, "cosmic_rays": 5},
    "offload.lookups.evicted_by": lambda v: {**v, "row": 1.5},
    "offload.geometry": lambda v: {**v, "page_tokens": 0},
    "offload.prompt_tokens": lambda v: [v],
}
for _p in V3_SECTIONS:
    if _p.endswith(("age_seconds", "idle_seconds")):
        BREAK[_p] = lambda v: {**v, "buckets": {"1.0": 0}}  # no +Inf


def _wrong_type(value: Any) -> Any:
    return "many"


@pytest.mark.parametrize("path", V3_SECTIONS)
def test_a_broken_addition_is_left_out_alone_and_named(path: str) -> None:
    assert set(BREAK) <= set(V3_SECTIONS)
    whole = load("contract_example_v3.json")
    obj = copy.deepcopy(whole)
    parent, key = _section(obj, path), path.rsplit(".", 1)[1]
    parent[key] = BREAK.get(path, _wrong_type)(parent[key])
    snap = snapshot_from_obj(obj)
    assert snap.dropped_fields == (path,)
    assert snap.offload is not None
    assert key not in _section({"offload": snap.offload.fields}, path)
    # Everything else is read as before.
    left = copy.deepcopy(whole)
    del _section(left, path)[key]
    assert exposition(obj) == exposition(left)


@pytest.mark.parametrize(("change", "why"), [
    (lambda h: h["buckets"].update({"10.0": h["buckets"]["60.0"] + 1}), "falling buckets"),
    (lambda h: h.update({"count": h["count"] + 1}), "+Inf other than the count"),
    (lambda h: h.update({"count": 0, "buckets": dict.fromkeys(h["buckets"], 0)}),
     "a sum without observations"),
])
def test_a_histogram_that_cannot_be_a_prometheus_one_is_left_out(
        change: Callable[[dict[str, Any]], None], why: str) -> None:
    obj = load("contract_example_v3.json")
    change(obj["offload"]["evictions"]["row"]["age_seconds"])
    snap = snapshot_from_obj(obj)
    assert snap.dropped_fields == ("offload.evictions.row.age_seconds",), why
    got = exposition(obj)
    assert (("pressure", "row"),) not in got["helios_offload_eviction_age_seconds_count"]
    assert (("pressure", "page"),) in got["helios_offload_eviction_age_seconds_count"]


def test_an_error_outside_the_additions_still_fails_the_snapshot() -> None:
    obj = load("contract_example_v3.json")
    obj["offload"]["lookups"]["blocked_tokens"]["cosmic_rays"] = 1
    obj["offload"]["slabs"]["row"]["free"] = "none"
    with pytest.raises(SnapshotError) as err:
        snapshot_from_obj(obj)
    assert err.value.reason == ErrorReason.SCHEMA
    assert err.value.path == "offload.slabs.row.free"


def _bounds(n: int) -> dict[str, int]:
    """A histogram of n finite bounds (10 ms x 2^i) and +Inf, one observation per bucket."""
    buckets = {repr(0.01 * 2 ** i): i + 1 for i in range(n)}
    return {**buckets, "+Inf": n + 1}


def test_thirty_two_buckets_are_cut_to_the_row_s_bound_and_stay_exact() -> None:
    obj = load("contract_example_v3.json")
    rt = obj["offload"]["host"]["restore_transfers"]
    rt.update(count=32, seconds_sum=3.0, seconds_buckets=_bounds(31))
    ev = obj["offload"]["evictions"]["page"]["idle_seconds"]
    ev.update(count=32, sum=3.0, buckets=_bounds(31))
    got = exposition(obj)
    restore = got["helios_offload_host_restore_transfer_seconds_bucket"]
    idle = {k: v for k, v in got["helios_offload_eviction_idle_seconds_bucket"].items()
            if ("pressure", "page") in k}
    assert len(restore) == 8 and len(idle) == 5
    for kept in (restore, idle):
        for labels, n in kept.items():
            le = dict(labels)["le"]
            assert n == _bounds(31)[le]  # each kept bucket is the engine's count at its bound
        assert (("le", repr(0.01 * 2 ** 30)),) in {k[:1] for k in kept}  # the largest stays


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0001, 1e6), min_size=0, max_size=31, unique=True),
       st.integers(1, 31))
def test_kept_bounds_are_a_subset_with_the_largest(finite: list[float], keep: int) -> None:
    finite.sort()
    kept = kept_bounds(finite, keep)
    assert kept == sorted(set(kept)) and set(kept) <= set(finite)
    assert len(kept) == min(keep, len(finite))
    if finite:
        assert kept[-1] == finite[-1]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**60) | st.floats(allow_nan=False,
                                                                   allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["count", "sum", "buckets", "+Inf", "1.0", "row", "stored", "bytes",
                         "seconds_sum", "seconds_buckets", "x"]), inner, max_size=5),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(V3_SECTIONS), JSON)
def test_any_value_of_an_addition_is_read_or_left_out(path: str, value: Any) -> None:
    """Hostile additions never fail the snapshot nor give an exposition that does not parse."""
    obj = load("contract_example_v3.json")
    parent, key = _section(obj, path), path.rsplit(".", 1)[1]
    parent[key] = value
    snap = snapshot_from_obj(obj)
    assert snap.dropped_fields in ((), (path,))
    got = exposition(obj)
    for samples in got.values():
        assert all(math.isfinite(v) and v >= 0 for v in samples.values())


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=80), st.integers(), st.none(), st.lists(st.text(max_size=3)),
                 st.just("x" * 1000), st.just("bad engine")))
def test_an_unusable_identity_engine_is_dropped_never_the_snapshot(engine: Any) -> None:
    """identity.engine (v3) is descriptive, like the other identity strings: one that cannot be
    a label value is left out and counted; the snapshot (and the engine's series) stand."""
    doc = json.loads((SNAPSHOTS / "simulator_tour_v3.json").read_text())
    doc["identity"]["engine"] = engine
    snap = snapshot_from_obj(doc)
    if isinstance(engine, str) and label_value_ok(engine):
        assert snap.engine == engine and "identity.engine" not in snap.dropped_fields
        return
    assert snap.engine is None
    assert "identity.engine" in snap.dropped_fields
    assert snap.offload is not None and snap.generation == doc["generation"]
