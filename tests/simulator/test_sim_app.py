from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from simulator.app import build_app, tokenize
from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.runner import build_scenario
from tools.harness import families as exposition_families

pytestmark = pytest.mark.anyio

PROMPT = " ".join(f"w{i}" for i in range(300))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def no_sleep(_: float) -> None:
    return None


@contextlib.asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
            yield client


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engine(clock: ManualClock) -> SimulatedEngine:
    return SimulatedEngine(EngineConfig(), clock=clock, seed=5)


@pytest.fixture
async def client(engine: SimulatedEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(build_app(engine, sleep=no_sleep)) as c:
        yield c


async def complete(
    client: httpx.AsyncClient, max_tokens: int = 8, prompt: str = PROMPT
) -> tuple[int, dict[str, Any]]:
    response = await client.post(
        "/v1/completions", json={"model": "qwen3-next", "prompt": prompt, "max_tokens": max_tokens}
    )
    return response.status_code, response.json()


async def test_snapshot_and_health(client: httpx.AsyncClient, engine: SimulatedEngine) -> None:
    snap = await client.get("/debug/offload/snapshot")
    assert snap.status_code == 200
    assert snap.headers["content-type"].startswith("application/json")
    assert snap.json() == engine.snapshot()
    health = await client.get("/health")
    assert health.status_code == 200 and health.json()["generation"] == engine.generation


async def test_completion_runs_through_the_engine(
    client: httpx.AsyncClient, engine: SimulatedEngine, clock: ManualClock
) -> None:
    status, body = await complete(client, max_tokens=12)
    assert status == 200
    assert body["object"] == "text_completion"
    assert body["id"].startswith("cmpl-")
    assert body["choices"][0]["index"] == 0 and body["choices"][0]["finish_reason"] == "length"
    assert len(body["choices"][0]["text"].split()) == 12
    assert body["usage"] == {"prompt_tokens": 300, "completion_tokens": 12, "total_tokens": 312}
    assert engine.running == 0
    clock.advance(1)  # the host stores complete
    assert (await complete(client))[0] == 200
    offload = (await client.get("/debug/offload/snapshot")).json()["offload"]
    assert offload["lookups"] == {"total": 2, "hits": 1, "misses": {"no_prefix": 1},
                                  "blocked_tokens": {"no_prefix": 300},  # schema 3 (default)
                                  "evicted_by": {"row": 0, "page": 0, "ancestor_compaction": 0}}
    assert offload["host"]["stores"] == 3


async def test_token_id_prompts_are_accepted(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/completions", json={"prompt": list(range(100)), "max_tokens": 1}
    )
    assert response.status_code == 200
    assert response.json()["usage"]["prompt_tokens"] == 100
    assert tokenize("a b  c") == tokenize("a b c") and len(tokenize("a b c")) == 3
    bad = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": -1})
    assert bad.status_code == 422


async def test_metrics_parse_as_prometheus_text(client: httpx.AsyncClient) -> None:
    await complete(client, max_tokens=5)
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = exposition_families(response.text)
    assert families["helios:prompt_tokens"].type == "counter"
    assert families["helios:generation_tokens"].type == "counter"
    assert families["helios:num_running_reqs"].type == "gauge"
    assert families["helios:e2e_request_latency_seconds"].type == "histogram"
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families.values() for s in f.samples}
    assert samples[("helios:prompt_tokens_total", (("model_name", "qwen3-next"),))] == 300
    assert samples[("helios:generation_tokens_total", (("model_name", "qwen3-next"),))] == 5
    assert samples[("helios:num_running_reqs", (("model_name", "qwen3-next"),))] == 0
    requests = [s for s in families["helios:requests"].samples if s.name.endswith("_total")]
    assert len(requests) == 1 and set(requests[0].labels) == {"model_name", "request_id"}


async def test_admission_draining_refuses_new_completions(client: httpx.AsyncClient) -> None:
    state = await client.post("/admin/admission", json={"state": "draining"})
    assert state.status_code == 200 and state.json()["admission"] == "draining"
    assert (await complete(client))[0] == 503
    assert (await client.get("/health")).status_code == 200
    snap = (await client.get("/debug/offload/snapshot")).json()
    assert snap["admission"]["state"] == "draining"
    await client.post("/admin/admission", json={"state": "closed"})
    assert (await complete(client))[0] == 503
    assert (await client.post("/admin/admission", json={"state": "ajar"})).status_code == 422
    await client.post("/admin/admission", json={"state": "open"})
    assert (await complete(client))[0] == 200


async def test_crash_answers_503_everywhere_until_restart(
    client: httpx.AsyncClient, engine: SimulatedEngine
) -> None:
    old, container = engine.generation, engine.container_id
    assert (await client.post("/admin/crash")).json()["crashed"] is True
    for path in ("/metrics", "/debug/offload/snapshot", "/health"):
        response = await client.get(path)
        assert response.status_code == 503, path
        assert "schema_version" not in response.text
    assert (await complete(client))[0] == 503
    assert (await client.get("/admin/state")).json()["crashed"] is True
    restarted = (await client.post("/admin/restart", json={"container": "same"})).json()
    assert restarted["crashed"] is False and restarted["admission"] == "open"
    assert restarted["generation"] != old and restarted["container_id"] == container
    snap = (await client.get("/debug/offload/snapshot")).json()
    assert snap["generation"] == restarted["generation"]
    assert snap["offload"]["lookups"]["total"] == 0


async def test_request_cut_by_a_crash_answers_503(engine: SimulatedEngine) -> None:
    async def crash_while_running(_: float) -> None:
        engine.crash()

    async with serve(build_app(engine, sleep=crash_while_running)) as client:
        assert (await complete(client))[0] == 503


async def test_restart_variations(client: httpx.AsyncClient, engine: SimulatedEngine) -> None:
    old, container = engine.generation, engine.container_id
    same = (await client.post("/admin/restart", json={"generation": old})).json()
    assert same["generation"] == old
    digest = "sha256:" + "cd" * 32
    new = (await client.post("/admin/restart",
                             json={"container": "new", "image_digest": digest})).json()
    assert new["container_id"] != container and new["image_digest"] == digest
    back = (await client.post("/admin/restart", json={"container_id": container})).json()
    assert back["container_id"] == container and back["generation"] != new["generation"]
    for bad in ({"generation": "no spaces"}, {"generation": "x" * 65}, {"container": "old"},
                {"container_id": "NOT-HEX"}, {"container": "new", "container_id": container}):
        assert (await client.post("/admin/restart", json=bad)).status_code == 422
    assert (await client.get("/admin/state")).json()["container_id"] == container


async def test_inflight_pin(client: httpx.AsyncClient) -> None:
    pinned = (await client.post("/admin/inflight", json={"count": 3})).json()
    assert pinned["inflight_requests"] == 3
    snap = (await client.get("/debug/offload/snapshot")).json()
    assert snap["admission"]["inflight_requests"] == 3
    unpinned = (await client.post("/admin/inflight", json={"count": None})).json()
    assert unpinned["inflight_requests"] == 0
    assert (await client.post("/admin/inflight", json={"count": -1})).status_code == 422
    assert (await client.post("/admin/traffic", json={"enabled": False})).status_code == 409


async def test_lifespan_runs_background_traffic() -> None:
    engine = SimulatedEngine(EngineConfig(), seed=1)
    scenario = build_scenario("steady", seed=1, rate=40.0)
    async with serve(build_app(engine, scenario=scenario)) as client:
        for _ in range(100):  # up to 5 s
            if engine.stats.lookups >= 3:
                break
            await asyncio.sleep(0.05)
        assert engine.stats.lookups >= 3
        state = (await client.post("/admin/traffic", json={"enabled": False})).json()
        assert state["scenario"]["name"] == "steady"
        assert state["scenario"]["traffic_enabled"] is False
        paused_at = engine.stats.lookups
        await asyncio.sleep(0.3)
        assert engine.stats.lookups == paused_at
