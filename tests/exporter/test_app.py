from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from exporter.app import build_app
from tests.helpers import StubEngine, make_sidecar, promtool_check_metrics
from tools.harness import families, sample


async def _client_for(engine: StubEngine, tmp_path: Path):  # type: ignore[no-untyped-def]
    sidecar = make_sidecar(engine, tmp_path)
    app = build_app(sidecar.loop, sidecar.cache, sidecar.status, None)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sidecar")
    return sidecar, client


def test_healthz_fails_once_no_cycle_completed_for_the_stale_bound(tmp_path: Path) -> None:
    """A wedged loop is restarted: /healthz answers 503 past `stale_after`, counted from the
    loop's start before the first cycle and from the last completed cycle after it."""
    from exporter.config import Config
    from exporter.sidecar import build

    now = [1000.0]
    config = Config(engine_url="http://engine.test", state_dir=tmp_path, no_nvml=True,
                    poll_interval=1.0, timeout=0.5, healthz_stale_polls=3)
    assert config.stale_after == 3 * 1.0 + 2.0  # the host source's 2 s is the slowest
    probes = Config(engine_url="http://e", preflight_direct_url="http://e/v1",
                    preflight_routed_url="http://r/v1", preflight_timeout=7.0)
    # Preflight probes run as the keeper's own task, beside the cycle: they never lengthen it.
    assert probes.stale_after == 3 * 5.0 + 2.0

    async def run() -> None:
        engine = StubEngine()
        sidecar = build(config, transport=httpx.MockTransport(engine),
                        monotonic=lambda: now[0])
        app = build_app(sidecar.loop, sidecar.cache, sidecar.status, None,
                        stale_after=config.stale_after)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s")

        async def healthz() -> httpx.Response:
            return await client.get("/healthz")

        assert (await healthz()).status_code == 200
        now[0] += 5.0
        assert (await healthz()).status_code == 200
        now[0] += 0.01
        stale = await healthz()
        assert stale.status_code == 503
        assert stale.json() == {"status": "stale", "seconds_since_last_poll_cycle": 5.01,
                                "stale_after_seconds": 5.0}
        assert (await client.get("/status")).json()["freshness"]["stale"] is True
        await sidecar.loop.cycle()
        assert (await healthz()).status_code == 200
        fresh = (await client.get("/status")).json()["freshness"]
        assert fresh["stale"] is False and fresh["seconds_since_last_poll_cycle"] == 0.0
        assert fresh["polled_at"] == sidecar.loop.view.polled_at
        fams = families((await client.get("/metrics")).content)
        assert sample(fams, "helios_exporter_poll_last_timestamp_seconds") == pytest.approx(
            sidecar.loop.view.polled_at)
        now[0] += 5.5
        assert (await healthz()).status_code == 503
        await client.aclose()
        await sidecar.client.aclose()
        sidecar.loop.close()

    asyncio.run(run())


@pytest.mark.e2e
def test_endpoints_before_and_after_first_cycle(tmp_path: Path) -> None:
    async def run() -> None:
        engine = StubEngine()
        sidecar, client = await _client_for(engine, tmp_path)
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 503
        # Before the first poll finished, whether the engine is up is unknown: not 0.
        early = await client.get("/metrics")
        promtool_check_metrics(early.content)
        assert "helios_engine_up" not in early.text
        assert (await client.get("/status")).json()["engine_up"] is None
        await sidecar.loop.cycle()
        assert "helios_engine_up 1.0" in (await client.get("/metrics")).text
        assert (await client.get("/readyz")).status_code == 200
        text = await client.get("/metrics")
        assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
        promtool_check_metrics(text.content)
        om = await client.get("/metrics", headers={"Accept": "application/openmetrics-text; "
                                                   "version=1.0.0,text/plain;q=0.5"})
        assert om.headers["content-type"].startswith("application/openmetrics-text")
        assert om.text.rstrip().endswith("# EOF")
        status = (await client.get("/status")).json()
        assert status["generation"] == "g-20261129T0412Z-7f3a"
        assert status["restore"]["phase"] == "serving"
        assert status["sources"]["engine_snapshot"]["up"] is True
        await client.aclose()
        await sidecar.client.aclose()
        sidecar.loop.close()

    asyncio.run(run())


def test_fifty_scrapes_cause_no_engine_requests(tmp_path: Path) -> None:
    async def run() -> None:
        engine = StubEngine()
        sidecar, client = await _client_for(engine, tmp_path)
        await sidecar.loop.cycle()
        before = len(engine.requests)
        assert before == 2  # one snapshot, one /metrics
        bodies = await asyncio.gather(*(client.get("/metrics") for _ in range(50)))
        assert all(b.status_code == 200 for b in bodies)
        assert len(engine.requests) == before
        await sidecar.loop.cycle()
        assert len(engine.requests) == before + 2
        await client.aclose()
        await sidecar.client.aclose()
        sidecar.loop.close()

    asyncio.run(run())


@pytest.mark.e2e
def test_broken_engine_keeps_a_valid_exposition_and_recovers(tmp_path: Path) -> None:
    async def run() -> None:
        engine = StubEngine()
        sidecar, client = await _client_for(engine, tmp_path)
        await sidecar.loop.cycle()
        engine.status = 502
        await sidecar.loop.cycle()
        broken = await client.get("/metrics")
        promtool_check_metrics(broken.content)
        assert "helios_engine_up 0.0" in broken.text
        assert 'helios_exporter_source_up{source="engine_snapshot"} 0.0' in broken.text
        assert ('helios_exporter_source_errors_total{reason="http_status",'
                'source="engine_snapshot"} 1.0') in broken.text
        assert "helios_offload_slab_free" not in broken.text  # stale values are not shown
        engine.status = 200
        await sidecar.loop.cycle()
        healed = await client.get("/metrics")
        assert "helios_engine_up 1.0" in healed.text and "helios_offload_slab_free" in healed.text
        await client.aclose()
        await sidecar.client.aclose()
        sidecar.loop.close()

    asyncio.run(run())
