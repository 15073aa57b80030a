"""Schema v3 from the simulator's own model: every field, the invariants of docs/snapshot.md
('Schema v3'), and the v1 snapshot unchanged inside it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import cli
from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.index import PrefixIndex
from simulator.runner import ENGINE_DEFAULTS, build_scenario, drive
from simulator.slabs import MIB, SlabGeometry, SlabPool
from simulator.stats import EVICTION_AGE_BUCKETS, RESTORE_SECONDS_BUCKETS, Histogram
from tests.simulator.harness import served
from tests.snapshot_v3 import strip_v3, violations

SCHEMAS = Path(__file__).resolve().parents[2] / "exporter" / "schema"
V1 = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "snapshot-v1.schema.json").read_text()))
V3 = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "snapshot-v3.schema.json").read_text()))
ROW, PAGE = 16 * MIB, 1 * MIB


def engine_v3(seed: int = 5, **config: Any) -> tuple[SimulatedEngine, ManualClock]:
    clock = ManualClock()
    return SimulatedEngine(EngineConfig(snapshot_version=3, **config), clock=clock, seed=seed), clock


def body(n: int, start: int) -> list[int]:
    return list(range(start, start + n))


def settle(engine: SimulatedEngine, clock: ManualClock, seconds: float = 5.0) -> None:
    """Let every store and request complete."""
    clock.advance(seconds)
    engine.poll()


def offload(engine: SimulatedEngine) -> dict[str, Any]:
    snap = engine.snapshot()
    assert violations(snap) == []
    off: dict[str, Any] = snap["offload"]
    return off


# -- the snapshot as a whole -------------------------------------------------------------------

@pytest.mark.parametrize("scenario", ["steady", "reverse-replay", "demo", "inert"])
def test_v3_is_the_v1_snapshot_plus_the_v3_fields(scenario: str) -> None:
    snaps = []
    for version in (1, 3):
        clock = ManualClock()
        engine = SimulatedEngine(
            EngineConfig(snapshot_version=version, **ENGINE_DEFAULTS[scenario]), clock=clock, seed=2)
        drive(engine, build_scenario(scenario, seed=2), clock, 40.0)
        snaps.append(engine.snapshot())
    v1, v3 = snaps
    assert v1["schema_version"] == 1 and v3["schema_version"] == 3
    V1.validate(v1)
    V3.validate(v3)
    assert violations(v3) == []
    assert strip_v3(v3) == v1


def test_the_default_is_schema_3_and_only_1_and_3_are_served() -> None:
    assert EngineConfig().snapshot_version == 3
    with pytest.raises(ValueError, match="snapshot_version"):
        EngineConfig(snapshot_version=2)


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


# -- geometry and the row checkpoint interval ----------------------------------------------------

def test_geometry_comes_from_the_configuration() -> None:
    engine, _ = engine_v3()
    assert offload(engine)["geometry"] == {"page_tokens": 64, "row_checkpoint_interval_tokens": 64,
                                           "min_reusable_tokens": 65}
    engine, _ = engine_v3(tokens_per_page=16, row_checkpoint_interval_tokens=256)
    assert offload(engine)["geometry"] == {"page_tokens": 16,
                                           "row_checkpoint_interval_tokens": 256,
                                           "min_reusable_tokens": 257}
    for bad in (0, 100, -64):
        with pytest.raises(ValueError, match="multiple of tokens_per_page"):
            EngineConfig(row_checkpoint_interval_tokens=bad)


def test_checkpoints_sit_on_whole_intervals_and_shorter_prompts_are_too_short() -> None:
    engine, clock = engine_v3(stores_per_request=3, row_checkpoint_interval_tokens=256)
    assert engine.checkpoint_depths(3100) == [16, 32, 48]  # 12 intervals of 4 blocks
    assert engine.checkpoint_depths(1000) == [4, 8, 12]
    assert engine.checkpoint_depths(256) == []
    assert engine.checkpoint_depths(257) == [4]
    engine.submit(body(256, 1000), 4)
    engine.submit(body(257, 5000), 4)
    settle(engine, clock)
    off = offload(engine)
    assert off["lookups"]["misses"] == {"too_short": 1, "no_prefix": 1}
    assert off["host"]["store_outcomes"]["dropped_ineligible"] == 1
    assert {n.depth for n in engine.index.nodes()} == {4}
    # A prompt that shares 3 blocks with a stored one meets no checkpoint within reach.
    engine.submit(body(192, 5000) + body(400, 9000), 4)
    assert offload(engine)["lookups"]["misses"]["no_checkpoint"] == 1


# -- the inert scenario ------------------------------------------------------------------------

@pytest.mark.parametrize("config", [{}, {"row_checkpoint_interval_tokens": 512},
                                    {"tokens_per_page": 16}])
def test_the_inert_scenario_cannot_hit_by_construction(config: dict[str, Any]) -> None:
    clock = ManualClock()
    engine = SimulatedEngine(EngineConfig(snapshot_version=3, **ENGINE_DEFAULTS["inert"], **config),
                             clock=clock, seed=4)
    drive(engine, build_scenario("inert", seed=4), clock, 240.0)
    off = offload(engine)
    lookups = off["lookups"]
    assert lookups["total"] > 500 and lookups["hits"] == 0
    assert lookups["misses"]["no_prefix"] == 1  # the first long prompt, before anything is stored
    assert set(lookups["misses"]) == {"no_prefix", "too_short", "no_checkpoint"}
    assert lookups["misses"]["too_short"] > 100 and lookups["misses"]["no_checkpoint"] > 200
    assert off["host"]["restore_transfers"]["count"] == 0
    assert off["prompt_tokens"]["host_restored"] == 0 and off["prompt_tokens"]["gpu_prefix"] > 0


# -- through the app and the command line --------------------------------------------------------

@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_store_fail_fault_fails_that_requests_stores() -> None:
    engine, clock = engine_v3(stores_per_request=3)
    async with served(engine, clock) as client:
        armed = await client.post("/admin/fault", json={"kind": "store_fail", "after_requests": 1})
        assert armed.status_code == 200, armed.text
        for start in (1000, 5000, 9000):
            answer = await client.post("/v1/completions", json={
                "prompt": body(700, start), "max_tokens": 4, "ignore_eos": True})
            assert answer.status_code == 200
        clock.advance(5.0)
        snap = (await client.get("/debug/offload/snapshot")).json()
    V3.validate(snap)
    assert snap["offload"]["host"]["store_outcomes"] == {
        "stored": 6, "dropped_full": 0, "dropped_ineligible": 0, "failed": 3}


def parse(*argv: str) -> argparse.Namespace:
    return cli.parser(environ={}).parse_args(list(argv))


def test_command_line_options() -> None:
    assert cli._engine_config(parse("--listen", "h:1")).snapshot_version == 3
    assert cli._engine_config(parse("--listen", "h:1", "--snapshot-version", "1")
                              ).snapshot_version == 1
    config = cli._engine_config(parse("--listen", "h:1", "--snapshot-version", "3",
                                      "--row-checkpoint-interval-tokens", "512"))
    assert config.snapshot_version == 3 and config.checkpoint_interval_tokens == 512
    assert cli._engine_config(parse("--listen", "h:1", "--scenario", "inert")).stores_per_request == 1
    with pytest.raises(SystemExit):
        parse("--listen", "h:1", "--snapshot-version", "2")


def test_an_interval_that_is_not_whole_pages_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse("--listen", "h:1", "--row-checkpoint-interval-tokens", "100")) == 2
    assert "--row-checkpoint-interval-tokens must be a positive multiple of --tokens-per-page " \
        "(64), got 100" in capsys.readouterr().err


# -- property: every invariant holds whatever the engine is asked ---------------------------------

BASES = [tuple(range(b * 1000, b * 1000 + 400)) for b in range(3)]
requests = st.tuples(st.just("submit"), st.integers(0, 2), st.integers(0, 400), st.booleans(),
                     st.booleans())
script = st.lists(st.one_of(requests, requests, st.tuples(st.just("wait"), st.floats(0, 2))),
                  min_size=5, max_size=40)


@settings(max_examples=60, deadline=None)
@given(script, st.integers(1, 4), st.sampled_from([1, 2]), st.integers(2, 6), st.integers(4, 30))
def test_every_invariant_holds_for_any_traffic(ops: list[tuple[Any, ...]], stores: int,
                                                interval: int, rows: int, pages: int) -> None:
    geometry = SlabGeometry(budget_bytes=rows + pages, row_fraction=(rows + 0.5) / (rows + pages),
                            row_record_bytes=1, page_record_bytes=1)
    clock = ManualClock()
    engine = SimulatedEngine(
        EngineConfig(geometry=geometry, tokens_per_page=16, stores_per_request=stores,
                     row_checkpoint_interval_tokens=16 * interval, device_cache_slots=1,
                     snapshot_version=3),
        clock=clock, seed=0)
    sent = []
    for op in ops:
        if op[0] == "submit":
            _, base, cut, other_model, fail = op
            sent.append(engine.submit(BASES[base][:cut], 4, "m2" if other_model else None,
                                      fail_stores=fail))
        else:
            clock.advance(op[1])
            engine.poll()
        snap = engine.snapshot()
        assert violations(snap) == []
        assert engine.index.audit() == []
    settle(engine, clock, 60.0)
    snap = engine.snapshot()
    V3.validate(snap)
    assert violations(snap) == []
    off = snap["offload"]
    prompts = sum(r.prompt_tokens for r in sent)
    assert sum(off["prompt_tokens"].values()) == prompts
    assert off["prompt_tokens"]["computed"] == sum(r.prompt_tokens - r.reused_tokens for r in sent)
    assert sum(off["lookups"]["blocked_tokens"].values()) == sum(
        r.prompt_tokens - r.reused_tokens for r in sent if r.hit_node is None)
    # The engine's own counter agrees once nothing is in flight.
    metrics = engine.metrics.render().decode()
    assert f'helios:prompt_tokens_total{{model_name="qwen3-next"}} {float(prompts)}' in metrics
