"""The observer the simulator models (the trace switch and its cost), its clocks, and the
one-shot faults that make an observer-cost repetition invalid: through the HTTP app."""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from simulator.app import build_app
from simulator.clock import ManualClock
from simulator.corpora import lane
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.latency import LatencyModel

pytestmark = pytest.mark.anyio
BODY = lane("fixture-1024").body(0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def serve(engine: SimulatedEngine) -> AsyncIterator[httpx.AsyncClient]:
    """The app on the engine's manual clock: a request's wait moves the clock by as much."""
    clock = engine.clock
    assert isinstance(clock, ManualClock)

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    app = build_app(engine, sleep=sleep)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
            yield client


def engine_with(cost: float, noise: float = 0.0) -> tuple[SimulatedEngine, ManualClock]:
    clock = ManualClock()
    config = EngineConfig(trace_cost=cost, latency=LatencyModel(noise=noise))
    return SimulatedEngine(config, clock=clock, seed=3), clock


async def latency_of(client: httpx.AsyncClient, engine: SimulatedEngine,
                     body: dict[str, Any] | None = BODY) -> float:
    """Send one fixture body (none: send nothing); the engine histogram's sum after it."""
    if body is not None:
        resp = await client.post("/v1/completions", json=body)
        assert resp.status_code == 200, resp.text
    sums = [s.value for s in engine.metrics.latency.collect()[0].samples
            if s.name.endswith("_sum")]
    return sums[0]


def test_decode_factor_lengthens_only_decode() -> None:
    model = LatencyModel(noise=0.0)
    rng = random.Random(1)
    base = model.seconds(100, 0, 64, rng)
    traced = model.seconds(100, 0, 64, rng, decode_factor=1.05)
    assert math.isclose(traced - base, 64 * 0.010 * 0.05)


async def test_the_trace_switch_costs_what_it_is_set_to() -> None:
    engine, _ = engine_with(0.05)
    async with serve(engine) as client:
        first = await latency_of(client, engine)
        state = (await client.post("/admin/trace", json={"enabled": True})).json()
        assert state["trace"] == {"enabled": True, "cost": 0.05}
        snap = (await client.get("/debug/offload/snapshot")).json()
        assert snap["simulator"] == {"trace": {"enabled": True, "cost": 0.05}}
        traced = await latency_of(client, engine) - first
        await client.post("/admin/trace", json={"enabled": False})
        plain = await latency_of(client, engine) - first - traced
    # Decode is 64 x 10 ms; the first request also prefilled, the later ones hit the cache.
    assert math.isclose(traced - plain, 64 * 0.010 * 0.05, rel_tol=1e-6)


async def test_a_warm_fixture_request_is_4_98_percent_longer_at_a_5_percent_cost() -> None:
    """docs/simulator.md and docs/experiments.md: 0.64 s of a warm request's 0.643 s is decode
    (the fixture's 16 bodies in turn: each restores from the host tier, none is still on the
    GPU)."""
    engine, clock = engine_with(0.05)
    fixture = lane("fixture-1024")

    async def a_pass(client: httpx.AsyncClient) -> float:
        start = await latency_of(client, engine, None)
        for i in range(fixture.bodies):
            end = await latency_of(client, engine, fixture.body(i))
        return (end - start) / fixture.bodies

    async with serve(engine) as client:
        await a_pass(client)  # stores every body's checkpoints
        clock.advance(1)  # and lets them complete
        off = await a_pass(client)
        await client.post("/admin/trace", json={"enabled": True})
        on = await a_pass(client)
    assert round(off, 3) == 0.643
    assert round((on / off - 1) * 100, 2) == 4.98


async def test_tracing_is_off_after_a_restart() -> None:
    engine, _ = engine_with(0.05)
    async with serve(engine) as client:
        await client.post("/admin/trace", json={"enabled": True})
        state = (await client.post("/admin/restart", json={"container": "same"})).json()
    assert state["trace"]["enabled"] is False


async def test_the_snapshot_lists_two_ranks_and_both_clocks() -> None:
    engine, clock = engine_with(0.0)
    async with serve(engine) as client:
        a = (await client.get("/debug/offload/snapshot")).json()
        clock.advance(2.5)
        b = (await client.get("/debug/offload/snapshot")).json()
    assert [r["rank"] for r in a["ranks"]] == [0, 1]
    assert a["clock"]["unix_seconds"] == clock() - 2.5
    assert b["clock"]["monotonic_seconds"] - a["clock"]["monotonic_seconds"] == 2.5
    assert b["clock"]["unix_seconds"] - a["clock"]["unix_seconds"] == 2.5


async def post_fault(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post("/admin/fault", json=body)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    return answer


async def test_each_fault_fires_once_at_its_request() -> None:
    engine, _ = engine_with(0.0)
    async with serve(engine) as client:
        await post_fault(client, kind="drop", after_requests=1)
        await post_fault(client, kind="short", after_requests=2)
        await post_fault(client, kind="clock_jump", after_requests=3, seconds=30)
        await post_fault(client, kind="rank_lost", after_requests=3)
        generation = engine.generation
        await post_fault(client, kind="restart", after_requests=4)
        answers = [await client.post("/v1/completions", json=BODY) for _ in range(6)]
        snap = (await client.get("/debug/offload/snapshot")).json()
        state = (await client.get("/admin/state")).json()
    assert [a.status_code for a in answers] == [200, 500, 200, 200, 200, 200]
    tokens = [a.json()["usage"]["completion_tokens"] for a in answers if a.status_code == 200]
    assert tokens == [64, 32, 64, 64, 64]
    assert answers[2].json()["choices"][0]["finish_reason"] == "stop"
    assert engine.generation != generation  # the restart (which brings the rank back)
    assert [r["rank"] for r in snap["ranks"]] == [0, 1]
    # The wall clock stepped by 30 s against the process clock (the manual clock stood still).
    assert snap["clock"]["unix_seconds"] - snap["clock"]["monotonic_seconds"] == engine._boot + 30
    assert state["faults"]["fired"] == {"clock_jump": 1, "drop": 1, "rank_lost": 1,
                                        "restart": 1, "short": 1}
    assert state["faults"]["armed"] == []


async def test_a_lost_rank_leaves_the_snapshot_until_the_restart() -> None:
    engine, _ = engine_with(0.0)
    async with serve(engine) as client:
        await post_fault(client, kind="rank_lost")
        assert (await client.post("/v1/completions", json=BODY)).status_code == 200
        snap = (await client.get("/debug/offload/snapshot")).json()
    assert [r["rank"] for r in snap["ranks"]] == [0]


async def test_a_dropped_request_is_not_counted_as_finished() -> None:
    engine, _ = engine_with(0.0)
    async with serve(engine) as client:
        await post_fault(client, kind="drop")
        assert (await client.post("/v1/completions", json=BODY)).status_code == 500
        assert (await client.post("/v1/completions", json=BODY)).status_code == 200
    counts = [s.value for s in engine.metrics.latency.collect()[0].samples
              if s.name.endswith("_count")]
    assert counts == [1.0]


async def test_bad_fault_bodies_are_refused() -> None:
    engine, _ = engine_with(0.0)
    async with serve(engine) as client:
        assert (await client.post("/admin/fault", json={"kind": "meteor"})).status_code == 422
        assert (await client.post("/admin/fault", json={"kind": "drop",
                                                        "after_requests": -1})).status_code == 422
        assert (await client.post("/admin/trace", json={"enabled": "yes"})).status_code == 422
