"""`simulate --flavor sglang|vllm`: /metrics in that engine version's shape, from the same
engine. The shape is held to the committed fixture its engine's own code rendered
(tests/fixtures/engines/): the same families, types and label names, so an engine version whose
families move fails here and names them. No snapshot in those flavors."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from simulator import cli
from simulator.app import build_app
from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.flavors import FLAVORS, MODELLED, SHAPES
from simulator.runner import ENGINE_DEFAULTS
from tools.engine_fixtures import output, shapes
from tools.engine_fixtures.engines import ENGINES

PROMPTS = [" ".join(f"p{n}w{i}" for i in range(400)) for n in range(8)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def served(flavor: str) -> AsyncIterator[tuple[httpx.AsyncClient, SimulatedEngine]]:
    clock = ManualClock()
    # one prompt on the device at a time, so that a prompt sent again comes from the host tier
    config = {**ENGINE_DEFAULTS["idle"], "device_cache_slots": 1, "stores_per_request": 1}
    engine = SimulatedEngine(EngineConfig(**config), clock=clock, seed=7)

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    app = build_app(engine, sleep=sleep, flavor=flavor)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
            yield client, engine


async def drive(client: httpx.AsyncClient, engine: SimulatedEngine, prompts: list[str]) -> None:
    for prompt in prompts:
        response = await client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 4})
        assert response.status_code == 200, response.text
        engine.clock.advance(5.0)  # type: ignore[attr-defined]  # the stores complete


def shape_of(text: str, prefix: str) -> dict[str, tuple[str, list[str], bool]]:
    """Family -> type, label names, and whether it has `_created` samples."""
    return {name: (family["type"], family["labels"],
                   any(n.endswith("_created") for n in family["samples"]))
            for name, family in output.exposed(text).items() if name.startswith(prefix)}


async def reused_from_host(flavor: str) -> tuple[str, SimulatedEngine]:
    """The flavor's /metrics once the host tier has stored and served a restore."""
    async with served(flavor) as (client, engine):
        await drive(client, engine, PROMPTS[:2])
        await drive(client, engine, PROMPTS[:1])  # back from the host tier
        await drive(client, engine, ["too short"])  # no checkpoint: a store skipped
        stats = engine.stats
        assert stats.tokens_restored and stats.host_stores and stats.dropped_ineligible
        return (await client.get("/metrics")).text, engine


@pytest.mark.anyio
@pytest.mark.parametrize("flavor", ["sglang", "vllm"])
async def test_the_flavor_has_the_fixtures_families_types_and_labels(flavor: str) -> None:
    engine = ENGINES[flavor]
    text, engine_used = await reused_from_host(flavor)
    fixture = (engine.folder / shapes.SOURCES[flavor].full).read_text(encoding="utf-8")
    ours, theirs = shape_of(text, flavor), shape_of(fixture, flavor)
    # A family the engine creates at its first event may be absent while the simulated engine
    # has had none (the flavor models it, and gives it no series yet), and only then.
    lazy = {f.name for f in SHAPES[flavor] if f.lazy}
    waiting = {name for name, series in MODELLED[flavor](engine_used).items()
               if not series and name in lazy}
    moved = {name: (ours.get(name), theirs.get(name)) for name in ours.keys() | theirs.keys()
             if ours.get(name) != theirs.get(name) and name not in waiting - ours.keys()}
    assert moved == {}, f"families that differ from {engine.folder.name}: {sorted(moved)}"
    assert len(waiting) <= 1, waiting  # the scenario above reaches all but allocation failures


@pytest.mark.anyio
async def test_sglang_host_tier_series_follow_the_engine() -> None:
    async with served("sglang") as (client, engine):
        await drive(client, engine, PROMPTS[:1])
        text = (await client.get("/metrics")).text
        assert "sglang:load_back_tokens_total" not in text  # created at the first load-back
        assert 'cache_source="host"' not in text
        samples = {(s.name, s.labels.get("pool")): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        pool, tokens = engine.pool, engine.config.tokens_per_page
        assert samples[("sglang:hicache_host_mamba_total_states", None)] == pool.row.capacity
        assert samples[("sglang:hicache_host_mamba_used_states", None)] == pool.row.used > 0
        assert samples[("sglang:hicache_host_used_tokens", None)] == pool.page.used * tokens
        assert samples[("sglang:page_size", None)] == tokens
        assert samples[("sglang:hicache_backup_tokens_total", "mamba")] == \
            engine.stats.host_stores > 0
    text, engine = await reused_from_host("sglang")
    after = {(s.name, s.labels.get("pool"), s.labels.get("cache_source")): s.value
             for f in text_string_to_metric_families(text) for s in f.samples}
    assert after[("sglang:load_back_tokens_total", "kv", None)] == engine.stats.tokens_restored
    assert after[("sglang:cached_tokens_total", None, "host")] == \
        engine.stats.prompt_host_restored > 0


@pytest.mark.anyio
async def test_vllm_offload_series_follow_the_engine() -> None:
    text, engine = await reused_from_host("vllm")
    samples = {(s.name, s.labels.get("source"), s.labels.get("transfer_type")): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    stats = engine.stats
    assert samples[("vllm:kv_offload_store_bytes_total", None, None)] == stats.stored_bytes > 0
    assert samples[("vllm:kv_offload_load_bytes_total", None, None)] == stats.restore_bytes > 0
    assert samples[("vllm:kv_offload_total_bytes_total", None, "GPU_to_CPU")] == stats.stored_bytes
    assert samples[("vllm:prompt_tokens_cached_by_source_total", "host", None)] == \
        stats.prompt_host_restored


@pytest.mark.anyio
@pytest.mark.parametrize("flavor", FLAVORS)
async def test_only_helios_serves_a_snapshot(flavor: str) -> None:
    async with served(flavor) as (client, _):
        status = (await client.get("/debug/offload/snapshot")).status_code
        metrics = (await client.get("/metrics")).text
    assert status == (200 if flavor == "helios" else 404)
    assert ("# TYPE helios:" in metrics) == (flavor == "helios")
    assert all(f"# TYPE {other}:" not in metrics for other in SHAPES if other != flavor)


def test_helios_is_the_default_flavor_and_the_others_are_choices() -> None:
    assert cli.parser().parse_args(["--listen", "127.0.0.1:1"]).flavor == "helios"
    for flavor in SHAPES:
        assert cli.parser().parse_args(["--listen", "127.0.0.1:1", "--flavor", flavor]).flavor \
            == flavor
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--listen", "127.0.0.1:1", "--flavor", "tgi"])


@pytest.mark.e2e
@pytest.mark.parametrize("flavor", ["sglang", "vllm"])
def test_simulate_serves_the_flavor_over_tcp(flavor: str) -> None:
    from tests.simulator.test_sim_serve import simulator

    with simulator("--flavor", flavor, "--scenario", "steady", "--seed", "3",
                   "--time-scale", "20") as client:
        assert client.get("/debug/offload/snapshot").status_code == 404
        deadline = time.monotonic() + 20
        while True:  # the scenario's traffic reaches the host tier
            text = client.get("/metrics").text
            stored = {s.name: s.value for f in text_string_to_metric_families(text)
                      for s in f.samples}
            key = {"sglang": "sglang:hicache_backup_bytes_total",
                   "vllm": "vllm:kv_offload_store_bytes_total"}[flavor]
            if stored.get(key, 0) > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert stored.get(key, 0) > 0
    assert not any(name.startswith("helios:") for name in stored)
