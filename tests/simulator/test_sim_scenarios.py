from __future__ import annotations

import itertools
from typing import Any

import pytest

from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.outage import OutageOptions, OutageScenario
from simulator.runner import ENGINE_DEFAULTS, build_scenario, drive
from simulator.scenarios import ReverseReplayScenario, SteadyScenario, replay_order


def setup(name: str, seed: int = 11, **kwargs: Any) -> tuple[SimulatedEngine, Any, ManualClock]:
    clock = ManualClock()
    engine = SimulatedEngine(EngineConfig(**ENGINE_DEFAULTS[name]), clock=clock, seed=seed)
    return engine, build_scenario(name, seed=seed, **kwargs), clock


def test_reverse_replay_shows_row_pressure_with_page_headroom() -> None:
    engine, scenario, clock = setup("reverse-replay")
    assert isinstance(scenario, ReverseReplayScenario)
    geometry = engine.pool.geometry
    assert (geometry.budget_bytes, geometry.row_capacity, geometry.page_capacity) == (
        32 << 30, 512, 24576,
    )
    per_pass = scenario.prompts / scenario.rate  # 13 s
    attempts, hits = [], []
    for expected_phase in ("reverse", "forward", "reverse", "forward"):
        drive(engine, scenario, clock, per_pass)
        assert scenario.phase == expected_phase
        offload = engine.snapshot()["offload"]
        attempts.append(offload["evictions"]["row"]["attempts"])
        hits.append(offload["lookups"]["hits"])
        page = offload["slabs"]["page"]
        assert page["free"] / page["capacity"] > 0.25
        assert offload["slabs"]["row"]["free"] == 0
        assert offload["evictions"]["page"]["attempts"] == 0
    # The prime alone overflows the row slab; every later pass evicts more.
    assert attempts[0] > 0
    assert all(b > a for a, b in itertools.pairwise(attempts))
    assert hits[0] == 0  # prime: 52 fresh bodies
    assert hits[1] > 30  # reverse replay finds the most recent ones
    assert hits[3] > hits[2] > hits[1]
    offload = engine.snapshot()["offload"]
    assert offload["retired_leaves"]["row"] == offload["evictions"]["row"]["evicted"]
    assert engine.index.audit() == []


def test_steady_mixes_hits_and_misses_and_stays_bounded() -> None:
    engine, scenario, clock = setup("steady")
    assert isinstance(scenario, SteadyScenario)
    drive(engine, scenario, clock, 240)
    offload = engine.snapshot()["offload"]
    lookups = offload["lookups"]
    assert 240 * 3 * 0.8 < lookups["total"] < 240 * 3 * 1.2
    assert lookups["hits"] > 0
    reasons = {reason.split(":")[0] for reason in lookups["misses"]}
    assert {"no_prefix", "too_short", "key_mismatch"} <= reasons
    assert offload["evictions"]["row"]["attempts"] > 0  # the row slab fills within minutes
    assert engine.running < 10
    assert len(engine.index.nodes()) < 2 * 512
    assert engine.index.audit() == []


def phases_over(engine: SimulatedEngine, scenario: OutageScenario, clock: ManualClock,
                seconds: float, step: float = 0.5) -> list[dict[str, Any]]:
    seen = []
    end = clock() + seconds
    while clock() < end:
        drive(engine, scenario, clock, step)
        seen.append({
            "phase": scenario.phase, "crashed": engine.crashed, "admission": engine.admission,
            "inflight": engine.inflight, "generation": engine.generation,
            "container": engine.container_id, "image": engine.image_digest,
            "lookups": engine.stats.lookups,
        })
    return seen


def test_outage_plays_the_retained_restore_flow() -> None:
    engine, scenario, clock = setup("outage")
    assert isinstance(scenario, OutageScenario)
    opts = scenario.options
    total = opts.boundaries()[-1] + 10
    assert total <= 120  # the whole story fits in about a minute
    before = (engine.generation, engine.container_id, engine.image_digest)
    seen = phases_over(engine, scenario, clock, total)
    order = [s["phase"] for s in seen]
    assert [p for i, p in enumerate(order) if i == 0 or order[i - 1] != p] == [
        "serving", "draining", "closed", "down", "restored",
    ]
    serving = [s for s in seen if s["phase"] == "serving"]
    assert serving[-1]["lookups"] > 20 and serving[-1]["admission"] == "open"
    draining = [s for s in seen if s["phase"] == "draining"]
    assert {s["admission"] for s in draining} == {"draining"}
    assert draining[-1]["inflight"] == 0  # in-flight falls to zero during the drain
    assert all(s["admission"] == "closed" for s in seen if s["phase"] == "closed")
    assert all(s["crashed"] for s in seen if s["phase"] == "down")
    restored = [s for s in seen if s["phase"] == "restored"]
    assert restored[-1]["admission"] == "open" and not restored[-1]["crashed"]
    assert restored[-1]["generation"] != before[0]
    assert (restored[-1]["container"], restored[-1]["image"]) == before[1:]
    assert restored[-1]["lookups"] > 0  # fresh counters, traffic resumed
    times = dict(scenario.transitions)
    assert times["draining"] - times["serving"] == pytest.approx(opts.outage_after, abs=0.3)
    assert times["down"] - times["closed"] == pytest.approx(opts.closed_seconds, abs=0.3)


def test_outage_variations() -> None:
    options = OutageOptions(outage_after=2, drain_seconds=2, closed_seconds=1, down_seconds=2,
                            container="new", keep_generation=True, new_image=True,
                            stuck_requests=2)
    engine, scenario, clock = setup("outage", outage=options)
    before = (engine.generation, engine.container_id, engine.image_digest)
    seen = phases_over(engine, scenario, clock, 10, step=0.25)
    assert all(s["inflight"] == 2 for s in seen if s["phase"] in ("draining", "closed"))
    after = seen[-1]
    assert after["phase"] == "restored"
    assert after["generation"] == before[0]
    assert after["container"] != before[1]
    assert after["image"] != before[2]
    assert engine.inflight_override is None


def test_traffic_can_be_paused() -> None:
    engine, scenario, clock = setup("steady")
    scenario.traffic_enabled = False
    drive(engine, scenario, clock, 10)
    assert engine.stats.lookups == 0


def test_unknown_scenario_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        build_scenario("chaos")


def test_demo_replays_in_clean_passes_then_plays_the_outage() -> None:
    """The demo scenario: prime, forward and reverse passes of probe-52 (the cache-order probe's two
    outcomes), each one clean step of the counters (quiet between passes), the drain in the quiet
    after the third, and a fresh prime after the restore."""
    engine, scenario, clock = setup("demo")
    assert isinstance(scenario, OutageScenario)
    replay = scenario.serving
    assert isinstance(replay, ReverseReplayScenario) and replay.pass_gap > 0
    per_pass = replay.prompts / replay.rate
    t0 = clock()
    edges = []  # (lookups, hits) in the middle of each quiet stretch
    for n in range(1, 4):
        drive(engine, scenario, clock,
              t0 + n * (per_pass + replay.pass_gap) - replay.pass_gap / 2 - clock())
        offload = engine.snapshot()["offload"]
        edges.append((offload["lookups"]["total"], offload["lookups"]["hits"],
                      offload["evictions"]["row"]["attempts"]))
        assert offload["evictions"]["page"]["attempts"] == 0
        page = offload["slabs"]["page"]
        assert page["free"] / page["capacity"] > 0.25  # pages sit free under row pressure
    assert [replay_order(n, replay.cycle) for n in range(3)] == ["prime", "forward", "reverse"]
    assert [lookups for lookups, _, _ in edges] == [52, 104, 156]
    # hits per pass: the prime none, the forward replay none (its rows were retired before their
    # turn: one row eviction per stored row), the reverse replay the 43 that survived
    assert [b[1] - a[1] for a, b in itertools.pairwise([(0, 0, 0), *edges])] == [0, 0, 43]
    assert [b[2] - a[2] for a, b in itertools.pairwise([(0, 0, 0), *edges])] == [112, 624, 112]
    incumbent = engine.generation
    drive(engine, scenario, clock, t0 + scenario.options.outage_after + 0.5 - clock())
    assert scenario.phase == "draining" and engine.stats.lookups == 156  # drained in the quiet
    drive(engine, scenario, clock, t0 + scenario.options.boundaries()[-1] + 5 - clock())
    assert scenario.phase == "restored" and engine.generation != incumbent
    assert replay.pass_number == 0 and engine.stats.lookups > 0  # a fresh prime
    assert engine.snapshot()["offload"]["lookups"]["hits"] == 0
