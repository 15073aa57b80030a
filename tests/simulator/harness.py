"""Drive the simulated engine's real HTTP app as the probe does: corpus bodies sent as is, one at a
time, each pass bracketed by captures of the snapshot and the engine's own /metrics.

The app runs in-process (httpx.ASGITransport) on a ManualClock whose sleep advances the clock, so
a pass of 52 requests takes milliseconds and repeats exactly under one seed.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from simulator.app import build_app
from simulator.clock import ManualClock
from simulator.corpora import lane
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.runner import ENGINE_DEFAULTS
from simulator.slabs import SlabGeometry

OTHER_MODEL = "qwen3-next-lora-support"


@functools.cache
def corpus(name: str, model: str | None = None) -> tuple[bytes, ...]:
    """A corpus's JSONL lines, the exact bytes the probe sends."""
    lines = lane(name).lines(model) if model else lane(name).lines()
    return tuple(line.encode() for line in lines)


def idle_engine(seed: int = 3, **config: Any) -> tuple[SimulatedEngine, ManualClock]:
    """The engine `simulate --scenario idle` serves: generic geometry, 12 stores/request."""
    clock = ManualClock()
    settings = {**ENGINE_DEFAULTS["idle"], **config}
    return SimulatedEngine(EngineConfig(**settings), clock=clock, seed=seed), clock


def with_row_fraction(fraction: float) -> dict[str, Any]:
    return {"geometry": SlabGeometry(row_fraction=fraction)}


@contextlib.asynccontextmanager
async def served(engine: SimulatedEngine, clock: ManualClock) -> AsyncIterator[httpx.AsyncClient]:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    # No scenario: its runner would share this sleep and spin the clock. Each request polls the
    # engine first (the app's middleware), which is all the idle scenario's runner adds.
    app = build_app(engine, sleep=sleep)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
            yield client


@dataclass(frozen=True)
class Capture:
    offload: dict[str, Any]
    metrics: dict[str, float]  # sample name -> value, labels ignored (one model)


async def capture(client: httpx.AsyncClient) -> Capture:
    snapshot = (await client.get("/debug/offload/snapshot")).json()
    text = (await client.get("/metrics")).text
    metrics: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "le" not in sample.labels:
                metrics[sample.name] = metrics.get(sample.name, 0.0) + sample.value
    return Capture(snapshot["offload"], metrics)


@dataclass(frozen=True)
class Pass:
    begin: Capture
    end: Capture
    responses: list[dict[str, Any]]

    def delta(self, *path: str) -> float:
        a: Any = self.begin.offload
        b: Any = self.end.offload
        for key in path:
            a, b = a[key], b[key]
        return float(b - a)

    @property
    def hits(self) -> int:
        return int(self.delta("lookups", "hits"))

    @property
    def misses(self) -> dict[str, int]:
        before = self.begin.offload["lookups"]["misses"]
        after = self.end.offload["lookups"]["misses"]
        return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}

    def metric(self, name: str) -> float:
        return self.end.metrics.get(name, 0.0) - self.begin.metrics.get(name, 0.0)

    @property
    def mean_latency(self) -> float:
        return self.metric("helios:e2e_request_latency_seconds_sum") / self.metric(
            "helios:e2e_request_latency_seconds_count"
        )

    @staticmethod
    def page_free_ratio(c: Capture) -> float:
        page = c.offload["slabs"]["page"]
        return float(page["free"] / page["capacity"])


async def run_pass(
    client: httpx.AsyncClient, bodies: Sequence[bytes], order: str = "forward"
) -> Pass:
    """One pass at concurrency 1; every request must succeed."""
    sequence = list(bodies) if order == "forward" else list(reversed(bodies))
    begin = await capture(client)
    responses = []
    for body in sequence:
        response = await client.post(
            "/v1/completions", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 200, response.text
        responses.append(response.json())
    end = await capture(client)
    return Pass(begin, end, responses)


def sent(body: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(body)
    return value


async def run_passes(
    engine: SimulatedEngine, clock: ManualClock, *plan: tuple[Sequence[bytes], str]
) -> list[Pass]:
    """Serve the engine and run each (bodies, order) pass in turn."""
    async with served(engine, clock) as client:
        return [await run_pass(client, bodies, order) for bodies, order in plan]


def counts(offload: dict[str, Any]) -> dict[str, Any]:
    """The offload section without the seconds its histograms observed (counts kept)."""
    out = copy.deepcopy(offload)
    for ev in out["evictions"].values():
        for key in ("age_seconds", "idle_seconds"):
            ev[key] = ev[key]["count"]
    transfers = out["host"]["restore_transfers"]
    out["host"]["restore_transfers"] = [transfers["count"], transfers["bytes"]]
    return out
