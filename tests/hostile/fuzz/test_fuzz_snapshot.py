"""Fuzz snapshot parsing and derivation: arbitrary bytes, and near-valid JSON made from the contract
example by random mutations. Only `SnapshotError` may come out of `parse_snapshot`; whatever it
accepts renders to an exposition that parses back, with every label bounded."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.cycle import derive
from exporter.labels import MISS_REASONS, miss_counts
from exporter.snapshot.model import Snapshot, SnapshotError
from exporter.snapshot.parse import parse_snapshot
from tests.helpers import contract_example, promtool_check_metrics
from tests.hostile.fuzz.fuzzlib import (
    FUZZ,
    PROMTOOL_SAMPLE,
    assert_offload_labels_bounded,
    render_snapshot,
)
from tools.harness import families

EXAMPLE = contract_example()
HOSTILE_TEXT = st.sampled_from(['"', "\\", "\n", "}", "{", "\x00", "\u202e", "\ud7ff", "é",
                                "ZQXJ\n", 'a"} 1\nx{y="', "no_prefix", "key_mismatch:ckpt=ab12",
                                "", " ", "g-1", "open", "draining", "closed", "a" * 200])
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([0, 1, -1, 2**53 - 1, 2**53, 2**53 + 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), HOSTILE_TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.text(max_size=8), HOSTILE_TEXT), inner,
                                            max_size=4)),
    max_leaves=12,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*prefix, i))
    return out


EXAMPLE_PATHS = paths(EXAMPLE)[1:]


@st.composite
def mutated_snapshot(draw: st.DrawFn, benign: bool = False) -> dict[str, Any]:
    """The contract example with 1-4 random edits; `benign` edits (drop a field, set a count in
    range) keep it mostly valid, so that rendering gets exercised as much as rejection."""
    doc = copy.deepcopy(EXAMPLE)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(EXAMPLE_PATHS))
        parent: Any = doc
        try:
            for part in path[:-1]:
                parent = parent[part]
            op = draw(st.sampled_from(["delete", "count", "count"] if benign else
                                      ["replace", "replace", "delete", "add", "number", "count"]))
            last = path[-1]
            if op == "delete" and isinstance(parent, dict):
                parent.pop(last, None)
            elif op == "add" and isinstance(parent, dict):
                parent[draw(st.one_of(st.text(max_size=12), HOSTILE_TEXT))] = draw(JSON_VALUES)
            elif op == "count":  # in range: mostly accepted, exercises the rendering
                parent[last] = draw(st.integers(0, 2**53 - 1))
            elif op == "number":
                parent[last] = draw(st.one_of(st.integers(-5, 2**60), st.floats()))
            else:
                parent[last] = draw(JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


def encode(doc: Any) -> bytes:
    # allow_nan: NaN / Infinity tokens are exactly what a sloppy engine sends.
    return json.dumps(doc, allow_nan=True).encode()


def parse_or_none(body: bytes) -> Snapshot | None:
    try:
        return parse_snapshot(body)
    except SnapshotError as exc:
        assert exc.reason.value in ("decode", "schema", "unsupported_version")
        return None


def check_accepted(snap: Snapshot) -> bytes:
    text = render_snapshot(snap, derive.advance_headroom(None, snap))
    fams = families(text)
    assert_offload_labels_bounded(fams)
    for fam in fams.values():
        for s in fam.samples:
            assert math.isfinite(s.value) and s.value >= 0, (s.name, s.value)
    if snap.offload is not None and snap.offload.lookups is not None \
            and snap.offload.lookups.misses is not None:
        reasons = {s.labels["reason"] for s in fams["helios_offload_lookup_misses"].samples}
        assert reasons == set(MISS_REASONS)
    return text


@FUZZ
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_only_ever_raise_snapshot_error(body: bytes) -> None:
    snap = parse_or_none(body)
    if snap is not None:
        check_accepted(snap)


@FUZZ
@given(st.one_of(JSON_VALUES, st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6)))
def test_arbitrary_json_only_ever_raises_snapshot_error(doc: Any) -> None:
    snap = parse_or_none(encode(doc))
    if snap is not None:
        check_accepted(snap)


@FUZZ
@given(mutated_snapshot())
def test_near_valid_snapshots_parse_or_fail_cleanly_and_render(doc: dict[str, Any]) -> None:
    snap = parse_or_none(encode(doc))
    if snap is not None:
        check_accepted(snap)


@FUZZ
@given(mutated_snapshot(benign=True))
def test_valid_variants_render_with_bounded_labels(doc: dict[str, Any]) -> None:
    snap = parse_or_none(encode(doc))
    if snap is not None:
        check_accepted(snap)


@FUZZ
@given(mutated_snapshot(benign=True), mutated_snapshot(benign=True), st.booleans())
def test_derivation_never_raises_and_headroom_only_grows(
    a: dict[str, Any], b: dict[str, Any], same_generation: bool
) -> None:
    if same_generation:
        b["generation"] = a.get("generation")
    first, second = parse_or_none(encode(a)), parse_or_none(encode(b))
    if first is None or second is None:
        return
    decreases = derive.counter_decreases(first, second)
    assert decreases == sorted(set(decreases))
    h1 = derive.advance_headroom(None, first)
    h2 = derive.advance_headroom(h1, second)
    if h2 is not None:
        assert h2.total >= 0
        if h1 is not None and h1.generation == h2.generation:
            assert h2.total >= h1.total
        check_accepted(second)
        text = render_snapshot(second, h2).decode()
        assert "helios_offload_row_pressure_with_page_headroom_total" in text
    for counts in (derive.offload_counters(first.offload), derive.offload_counters(second.offload)):
        assert all(isinstance(v, int) and v >= 0 for v in counts.values())


@FUZZ
@given(st.dictionaries(st.one_of(st.text(max_size=30), HOSTILE_TEXT),
                       st.integers(0, 2**53 - 1), max_size=50))
def test_miss_keys_fold_onto_the_closed_set_without_losing_counts(misses: dict[str, int]) -> None:
    counts = miss_counts(misses)
    assert list(counts) == list(MISS_REASONS)
    assert sum(counts.values()) == sum(misses.values())


@pytest.mark.e2e
@PROMTOOL_SAMPLE
@given(mutated_snapshot())
def test_promtool_accepts_a_sample_of_rendered_snapshots(doc: dict[str, Any]) -> None:
    snap = parse_or_none(encode(doc))
    promtool_check_metrics(check_accepted(snap if snap is not None else parse_snapshot(
        encode(EXAMPLE))))
