"""Schema v3's fields from the simulator's own model, one by one: host.store_outcomes and
host.stored_bytes, host.restore_transfers, the evictions' age and idle time, lookups.blocked_tokens,
lookups.evicted_by and prompt_tokens (the snapshot as a whole and its invariants: test_sim_v3.py)."""

from __future__ import annotations

import pytest

from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.index import PrefixIndex
from simulator.runner import ENGINE_DEFAULTS, build_scenario, drive
from simulator.slabs import SlabGeometry, SlabPool
from simulator.stats import EVICTION_AGE_BUCKETS, RESTORE_SECONDS_BUCKETS, Histogram
from tests.simulator.v3_engine import PAGE, ROW, body, engine_v3, offload, settle

# -- host.store_outcomes and host.stored_bytes ---------------------------------------------------

def test_stores_count_when_they_end_with_the_bytes_they_write() -> None:
    engine, clock = engine_v3(stores_per_request=3)
    # 700 tokens: 10 usable blocks, checkpoints at 3, 7 and 10 blocks: 3 rows and 10 pages.
    assert engine.checkpoint_depths(700) == [3, 7, 10]
    engine.submit(body(700, 1000), 4)
    host = offload(engine)["host"]
    assert host["store_outcomes"] == {"stored": 0, "dropped_full": 0, "dropped_ineligible": 0,
                                      "failed": 0}  # in flight: in none yet
    settle(engine, clock)
    host = offload(engine)["host"]
    assert host["store_outcomes"]["stored"] == host["stores"] == 3
    assert host["stored_bytes"] == 3 * ROW + 10 * PAGE
    # The same prompt again stores nothing new: no outcome, no bytes.
    engine.submit(body(700, 1000), 4)
    settle(engine, clock)
    assert offload(engine)["host"]["store_outcomes"]["stored"] == 3


def test_a_prompt_too_short_for_any_checkpoint_is_one_ineligible_store() -> None:
    engine, clock = engine_v3()
    for n in (0, 1, 30, 64):  # 64 tokens: the last is computed, so no whole block is usable
        engine.submit(body(n, 5000), 4)
    engine.submit(body(65, 6000), 4)  # one usable block: stored
    settle(engine, clock)
    outcomes = offload(engine)["host"]["store_outcomes"]
    assert outcomes == {"stored": 1, "dropped_full": 0, "dropped_ineligible": 4, "failed": 0}


def test_failed_stores_free_their_records_and_leave_nothing_behind() -> None:
    engine, clock = engine_v3(stores_per_request=3)
    free = (engine.pool.row.free, engine.pool.page.free)
    engine.submit(body(700, 1000), 4, fail_stores=True)
    assert engine.pool.row.free == free[0] - 3  # the records are held while the copy runs
    settle(engine, clock)
    off = offload(engine)
    assert off["host"]["store_outcomes"] == {"stored": 0, "dropped_full": 0,
                                             "dropped_ineligible": 0, "failed": 3}
    assert off["host"]["stored_bytes"] == 0
    assert (engine.pool.row.free, engine.pool.page.free) == free
    assert off["retired_leaves"] == {"row": 0, "page": 0}  # a failure is not an eviction
    assert engine.index.audit() == []
    assert engine.index.lookup(engine.key_for(None), body(700, 1000), clock()).reason == "no_prefix"


def small_index(rows: int, pages: int, tpp: int = 4, memory: int = 16) -> PrefixIndex:
    budget = rows + pages
    geometry = SlabGeometry(budget_bytes=budget, row_fraction=(rows + 0.5) / budget,
                            row_record_bytes=1, page_record_bytes=1)
    return PrefixIndex(SlabPool(geometry), tpp, retired_capacity=memory)


def blocks(*ids: int, tpp: int = 4) -> list[int]:
    return [b for b in ids for _ in range(tpp)] + [99]


KEY = "abcd000000000000"


def test_dropped_full_when_nothing_is_evictable_and_ineligible_when_too_large() -> None:
    index = small_index(rows=1, pages=3)
    node = index.begin_store(KEY, blocks(1), 1, 0.0)
    assert node is not None
    index.pin(node)
    index.complete_store(node, 0.0)
    assert index.begin_store(KEY, blocks(2), 1, 1.0) is None  # the only row is pinned
    assert index.begin_store(KEY, blocks(3, 4, 5, 6), 4, 1.0) is None  # 4 pages > a 3-page slab
    stats = index.stats
    assert (stats.dropped_full, stats.dropped_ineligible, stats.store_failures) == (1, 1, 2)
    assert stats.host_stores == 1 and stats.stored_bytes == 1 + 1  # a 1-byte row and page


def test_a_failed_store_on_a_compacted_checkpoint_still_reads_evicted() -> None:
    index = small_index(rows=2, pages=16)
    a = blocks(1, 2)
    first = index.begin_store(KEY, a, 1, 0.0)
    assert first is not None
    index.complete_store(first, 0.0)
    second = index.begin_store(KEY, a, 2, 0.0)
    assert second is not None
    index.complete_store(second, 0.0)
    index.pin(second)
    assert index.evict_once("row", 1.0) == "evicted"  # compacts `first`: its leaf is pinned
    again = index.begin_store(KEY, a, 1, 2.0)
    assert again == first
    index.fail_store(again, 3.0)
    result = index.lookup(KEY, blocks(1, 7), 4.0)
    assert result.reason == "evicted"
    assert index.stats.evicted_by == {"ancestor_compaction": 1}
    assert index.stats.stores_failed == 1 and index.audit() == []


# -- host.restore_transfers ----------------------------------------------------------------------

def test_a_host_hit_is_one_transfer_of_its_pages_and_row_at_the_modelled_bandwidth() -> None:
    engine, clock = engine_v3(stores_per_request=3)
    prompt = body(3100, 1000)
    engine.submit(prompt, 4)
    settle(engine, clock)
    for i in range(engine.config.device_cache_slots):  # push the prompt off the GPU
        engine.submit(body(100, 20_000 + 1000 * i), 4)
        settle(engine, clock)
    request = engine.submit(prompt, 4)
    settle(engine, clock)
    assert request.restored_tokens == 48 * 64 and request.reused_tokens == 48 * 64
    off = offload(engine)
    transfers = off["host"]["restore_transfers"]
    nbytes = 48 * PAGE + ROW
    assert transfers["count"] == 1 and transfers["bytes"] == nbytes
    assert transfers["seconds_sum"] == pytest.approx(nbytes / 25e9)  # 2.68 ms
    assert transfers["seconds_buckets"] == {"0.001": 0, "0.0025": 0, "0.005": 1, "0.01": 1,
                                            "0.025": 1, "0.05": 1, "0.1": 1, "+Inf": 1}
    assert off["host"]["tokens_restored"] == 48 * 64


def test_a_hit_the_gpu_already_holds_copies_nothing() -> None:
    engine, clock = engine_v3(stores_per_request=3)
    prompt = body(3100, 1000)
    engine.submit(prompt, 4)
    settle(engine, clock)
    request = engine.submit(prompt, 4)  # still on the GPU
    settle(engine, clock)
    assert request.hit_node is not None and request.restored_tokens == 0
    off = offload(engine)
    assert off["lookups"]["hits"] == 1 and off["host"]["restore_transfers"]["count"] == 0


# -- evictions.*.age_seconds and idle_seconds ----------------------------------------------------

def test_age_and_idle_at_eviction_come_from_the_clock() -> None:
    index = small_index(rows=2, pages=16)
    a = index.begin_store(KEY, blocks(1), 1, 0.0)
    b = index.begin_store(KEY, blocks(2), 1, 0.0)
    assert a is not None and b is not None
    index.complete_store(a, 1.0)
    index.complete_store(b, 2.0)
    assert index.lookup(KEY, blocks(1), 5.0).hit  # a served a hit at 5 s
    assert index.lookup(KEY, blocks(2), 6.0).hit
    assert index.lookup(KEY, blocks(1), 7.0).hit  # and again at 7 s: b is now the oldest
    c = index.begin_store(KEY, blocks(3), 1, 20.0)  # row pressure retires b (LRU)
    assert c is not None
    index.complete_store(c, 21.0)
    d = index.begin_store(KEY, blocks(4), 1, 30.0)  # then a: age 29, idle 23
    assert d is not None
    ev = index.stats.row_evictions
    assert ev.evicted == 2 and ev.age.count == 2 and ev.age.sum == (20.0 - 2.0) + (30.0 - 1.0)
    assert ev.idle.count == 2 and ev.idle.sum == (20.0 - 6.0) + (30.0 - 7.0)
    assert ev.age.buckets() == {"1.0": 0, "10.0": 0, "60.0": 2, "600.0": 2, "+Inf": 2}


def test_a_checkpoint_never_hit_has_an_age_and_no_idle_time() -> None:
    index = small_index(rows=4, pages=4)
    a = index.begin_store(KEY, blocks(1, 2, 3), 3, 0.0)
    assert a is not None
    index.complete_store(a, 0.5)
    b = index.begin_store(KEY, blocks(5, 6), 2, 4.0)  # page pressure retires a
    assert b is not None
    ev = index.stats.page_evictions
    assert (ev.evicted, ev.age.count, ev.age.sum, ev.idle.count) == (1, 1, 3.5, 0)
    assert index.stats.row_evictions.age.count == 0


def test_an_ancestor_compaction_is_aged_under_row_pressure() -> None:
    index = small_index(rows=2, pages=16)
    a = blocks(1, 2)
    first = index.begin_store(KEY, a, 1, 0.0)
    assert first is not None
    index.complete_store(first, 1.0)
    second = index.begin_store(KEY, a, 2, 2.0)  # in flight: the leaf is not eligible
    assert second is not None
    assert index.begin_store(KEY, blocks(5), 1, 11.0) is not None
    assert index.stats.ancestor_row_compactions == 1
    assert index.stats.row_evictions.age.sum == 10.0


def test_histogram_buckets_are_cumulative_and_bounded() -> None:
    hist = Histogram((1.0, 10.0))
    for value in (0.5, 1.0, 3.0, 10.0, 11.0, 99.0):
        hist.observe(value)
    assert hist.as_dict() == {"count": 6, "sum": 124.5,
                              "buckets": {"1.0": 2, "10.0": 4, "+Inf": 6}}
    with pytest.raises(ValueError):
        hist.observe(-1.0)
    with pytest.raises(ValueError):
        Histogram((10.0, 1.0))
    # What schema v3 allows per histogram (32 buckets) and the 60-series budget per engine.
    assert len(EVICTION_AGE_BUCKETS) + 1 == 5 and len(RESTORE_SECONDS_BUCKETS) + 1 == 8


# -- lookups.blocked_tokens, lookups.evicted_by, prompt_tokens ------------------------------------

def test_blocked_tokens_are_what_each_miss_left_to_compute() -> None:
    engine, clock = engine_v3(stores_per_request=3)
    engine.submit(body(30, 1000), 4)  # too_short, nothing on the GPU yet
    settle(engine, clock)
    engine.submit(body(700, 1000), 4)  # no_prefix; its first 30 tokens are on the GPU
    settle(engine, clock)
    engine.submit(body(700, 1000), 4, model="other-model")  # key_mismatch, all 699 on the GPU
    settle(engine, clock)
    engine.submit(body(700, 1000), 4)  # a hit: the GPU holds it all (699 of 700)
    settle(engine, clock)
    off = offload(engine)
    assert off["lookups"]["misses"] == {"too_short": 1, "no_prefix": 1, "key_mismatch:ckpt=" +
                                        engine.key_for(None)[:4]: 1}
    assert off["lookups"]["blocked_tokens"] == {"too_short": 30, "no_prefix": 670,
                                                "key_mismatch": 1}
    assert off["prompt_tokens"] == {"computed": 30 + 670 + 1 + 1, "gpu_prefix": 30 + 699 + 699,
                                    "host_restored": 0}
    assert sum(off["prompt_tokens"].values()) == 30 + 3 * 700


@pytest.mark.parametrize(("cause", "rows", "pages"), [("row", 1, 16), ("page", 4, 4)])
def test_evicted_by_names_the_pressure_that_retired_the_leaf(cause: str, rows: int,
                                                               pages: int) -> None:
    index = small_index(rows=rows, pages=pages)
    a = index.begin_store(KEY, blocks(1, 2, 3), 3, 0.0)
    assert a is not None
    index.complete_store(a, 0.0)
    b = index.begin_store(KEY, blocks(5, 6), 2, 1.0)
    assert b is not None
    assert index.lookup(KEY, blocks(1, 2, 3), 2.0).reason == "evicted"
    assert index.stats.evicted_by == {cause: 1}


def test_evicted_by_ancestor_compaction_in_the_tree_and_from_memory() -> None:
    for memory in (16, 0):  # the compacted node stays in the tree: its cause is kept there too
        index = small_index(rows=2, pages=16, memory=memory)
        a = blocks(1, 2)
        first = index.begin_store(KEY, a, 1, 0.0)
        assert first is not None
        index.complete_store(first, 0.0)
        assert index.begin_store(KEY, a, 2, 0.0) is not None
        assert index.begin_store(KEY, blocks(5), 1, 1.0) is not None  # compacts `first`
        assert index.lookup(KEY, blocks(1, 9), 2.0).reason == "evicted"
        assert index.stats.evicted_by == {"ancestor_compaction": 1}, memory


def test_the_thrashing_replay_misses_evicted_by_row_pressure() -> None:
    clock = ManualClock()
    engine = SimulatedEngine(EngineConfig(snapshot_version=3, **ENGINE_DEFAULTS["demo"]),
                             clock=clock, seed=1)
    drive(engine, build_scenario("demo", seed=1), clock, 28.0)  # the prime, then forward again
    lookups = offload(engine)["lookups"]
    assert lookups["misses"] == {"no_prefix": 52, "evicted": 52}
    assert lookups["evicted_by"] == {"row": 52, "page": 0, "ancestor_compaction": 0}
    assert lookups["blocked_tokens"]["evicted"] == 52 * (3100 - 9)  # the template is on the GPU
