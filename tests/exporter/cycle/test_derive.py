from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import catalogue
from exporter.cycle import derive
from exporter.labels import EVICTION_OUTCOMES, MISS_REASONS, PRESSURES, miss_counts, miss_reason
from exporter.snapshot.parse import snapshot_from_obj
from tests.helpers import contract_example


def snap(row_attempts: int, page_free: int, generation: str = "g1", **extra: Any):  # type: ignore[no-untyped-def]
    obj = contract_example()
    obj["generation"] = generation
    obj["offload"]["evictions"]["row"]["attempts"] = row_attempts
    obj["offload"]["slabs"]["page"]["free"] = page_free
    for key, value in extra.items():
        obj["offload"][key] = value
    return snapshot_from_obj(obj)


def test_miss_reason_mapping_is_closed() -> None:
    assert miss_reason("key_mismatch:ckpt=ab12") == "key_mismatch"
    assert miss_reason("no_prefix") == "no_prefix"
    assert miss_reason("evicted:row") == "evicted"
    assert miss_reason('x"}\n{') == "other"
    assert miss_reason("") == "other"
    counts = miss_counts({"no_prefix": 3, "key_mismatch:a": 1, "key_mismatch:b": 2,
                                 "weird": 5, "also weird:x": 1})
    assert set(counts) == set(MISS_REASONS)
    assert counts["key_mismatch"] == 3 and counts["other"] == 6 and counts["no_checkpoint"] == 0


def test_headroom_counts_row_attempts_only_with_page_headroom_at_both_polls() -> None:
    capacity = 24576
    roomy, tight = capacity // 2, capacity // 10
    h = derive.advance_headroom(None, snap(40, roomy))
    assert h is not None and h.total == 0  # first poll: baseline only
    h = derive.advance_headroom(h, snap(45, roomy))
    assert h is not None and h.total == 5
    h = derive.advance_headroom(h, snap(50, tight))  # pages tight at the end
    assert h is not None and h.total == 5
    h = derive.advance_headroom(h, snap(52, roomy))  # tight at the start of the interval
    assert h is not None and h.total == 5
    h = derive.advance_headroom(h, snap(60, capacity // 4))  # exactly 25% counts
    assert h is not None and h.total == 13


def test_headroom_restarts_with_a_new_generation() -> None:
    h = derive.advance_headroom(None, snap(10, 20000))
    h = derive.advance_headroom(h, snap(20, 20000))
    assert h is not None and h.total == 10
    h = derive.advance_headroom(h, snap(3, 20000, generation="g2"))
    assert h is not None and (h.generation, h.total) == ("g2", 0)


def test_headroom_absent_without_row_evictions() -> None:
    obj = contract_example()
    del obj["offload"]["evictions"]
    assert derive.advance_headroom(None, snapshot_from_obj(obj)) is None


def test_counter_decreases_within_a_generation_are_reported() -> None:
    a = snap(40, 100)
    lookups: dict[str, Any] = copy.deepcopy(contract_example()["offload"]["lookups"])
    lookups["total"] = 50
    b = snap(41, 100, lookups=lookups)
    assert derive.counter_decreases(a, b) == ["lookups.total"]
    assert derive.counter_decreases(a, snap(1, 100, generation="g2")) == []
    assert derive.counter_decreases(None, a) == []


_COUNT = st.integers(min_value=0, max_value=2**53 - 1)


@st.composite
def _evictions(draw: st.DrawFn) -> dict[str, Any]:
    """An evictions section as an engine may send it: either pressure or none, any of the
    outcomes, in any order."""
    out = {}
    for pressure in draw(st.permutations(PRESSURES)):
        if draw(st.booleans()):
            keys = draw(st.lists(st.sampled_from(EVICTION_OUTCOMES), unique=True))
            out[pressure] = {"attempts": draw(_COUNT), **{k: draw(_COUNT) for k in keys}}
    return out


@settings(max_examples=60, deadline=None)
@given(_evictions())
def test_every_reader_of_the_evictions_reads_what_the_engine_sent(evictions: dict[str, Any]) -> None:
    """The headroom counter's row attempts, the exported attempts and outcomes, and the counters
    watched for regressions all read the one validated section, by its paths."""
    obj = contract_example()
    obj["offload"]["evictions"] = evictions
    off = snapshot_from_obj(obj).offload
    assert off is not None
    sent = {(p, k): v for p, section in evictions.items() for k, v in section.items()}
    row = evictions.get("row", {}).get("attempts")
    assert derive.row_attempts(off) == row
    headroom = derive.advance_headroom(None, snapshot_from_obj(obj))
    assert (headroom.row_attempts if headroom is not None else None) == row
    attempts = catalogue.get("helios_offload_eviction_attempts_total").reader()
    outcomes = catalogue.get("helios_offload_eviction_outcomes_total").reader()
    assert attempts is not None and outcomes is not None
    assert (attempts(off) or {}) == {(p,): v for (p, k), v in sent.items() if k == "attempts"}
    assert (outcomes(off) or {}) == {key: v for key, v in sent.items() if key[1] != "attempts"}
    counters = derive.offload_counters(off)
    assert {k: v for k, v in counters.items() if k.startswith("evictions.")} == {
        f"evictions.{p}.{k}": v for (p, k), v in sent.items()}
