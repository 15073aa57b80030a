"""Schema v3 from the simulator's own model: the invariants of docs/snapshot.md ('Schema v3') over
any traffic, the v1 snapshot unchanged inside it, geometry, the inert scenario, the app and the
command line (the fields one by one: test_sim_v3_fields.py)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import cli
from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.runner import ENGINE_DEFAULTS, build_scenario, drive
from simulator.slabs import SlabGeometry
from tests.simulator.harness import served
from tests.simulator.v3_engine import V1, V3, body, engine_v3, offload, settle
from tests.snapshot_v3 import strip_v3, violations

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
