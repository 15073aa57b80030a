"""build_registry(): what the sidecar says about itself, and counters of closed sets at 0."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from exporter.app import build_app
from exporter.labels import ENGINE_PATHS, ERROR_REASONS, FETCH_OUTCOMES
from exporter.sources.engine_metrics import DEFAULT_ALLOW
from exporter.version import PYTHON_VERSION, VERSION
from tests.helpers import StubEngine, make_sidecar


def names(registry: CollectorRegistry) -> set[str]:
    return {s.name for fam in registry.collect() for s in fam.samples}


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value
            for fam in registry.collect() for s in fam.samples if s.name == name}


def test_build_info_and_the_standard_process_and_platform_collectors(tmp_path: Path) -> None:
    sidecar = make_sidecar(StubEngine(), tmp_path)
    get = sidecar.registry.get_sample_value
    assert get("helios_exporter_build_info",
               {"version": VERSION, "python_version": PYTHON_VERSION}) == 1
    assert len(samples(sidecar.registry, "helios_exporter_build_info")) == 1
    # client_python's ProcessCollector on this very process (Linux /proc)
    assert (get("process_resident_memory_bytes") or 0) > 0
    assert (get("process_open_fds") or 0) >= 3
    assert get("process_cpu_seconds_total") is not None
    assert get("python_info", {"implementation": "CPython", "major": "3", "minor": "11",
                               "patchlevel": PYTHON_VERSION.split(".")[2],
                               "version": PYTHON_VERSION}) == 1
    # ... instead of re-deriving the same figures under names of our own
    assert not {n for n in names(sidecar.registry) if n.startswith("helios_exporter_process_")}
    sidecar.close()


def test_closed_set_counters_are_zero_from_the_first_poll(tmp_path: Path) -> None:
    sidecar = make_sidecar(StubEngine(), tmp_path)
    assert samples(sidecar.registry, "helios_exporter_source_errors_total") == {}
    asyncio.run(sidecar.loop.cycle())
    errors = samples(sidecar.registry, "helios_exporter_source_errors_total")
    enabled = ("engine_snapshot", "engine_metrics", "host")  # --no-nvml
    assert errors == {(("reason", r), ("source", s)): 0.0 for s in enabled for r in ERROR_REASONS}
    requests = samples(sidecar.registry, "helios_exporter_engine_requests_total")
    assert set(requests) == {(("outcome", o), ("path", p)) for p in ENGINE_PATHS
                             for o in FETCH_OUTCOMES}
    assert sum(requests.values()) == 2 and requests[(("outcome", "ok"), ("path", "snapshot"))] == 1
    dropped = samples(sidecar.registry, "helios_exporter_engine_labels_dropped_total")
    assert set(dropped) == {(("family", f),) for f in DEFAULT_ALLOW}
    fields = samples(sidecar.registry, "helios_exporter_snapshot_fields_dropped_total")
    assert set(fields) == {(("field", f"identity.{k}"),)
                           for k in ("image_digest", "container_id", "package", "checkpoint")}
    assert set(fields.values()) == {0.0}
    asyncio.run(sidecar.client.aclose())
    sidecar.close()


def test_a_counted_error_replaces_its_zero(tmp_path: Path) -> None:
    engine = StubEngine()
    engine.status = 502
    sidecar = make_sidecar(engine, tmp_path)
    asyncio.run(sidecar.loop.cycle())
    errors = samples(sidecar.registry, "helios_exporter_source_errors_total")
    assert errors[(("reason", "http_status"), ("source", "engine_snapshot"))] == 1
    assert errors[(("reason", "timeout"), ("source", "engine_snapshot"))] == 0
    requests = samples(sidecar.registry, "helios_exporter_engine_requests_total")
    assert requests[(("outcome", "http_status"), ("path", "snapshot"))] == 1
    assert requests[(("outcome", "ok"), ("path", "snapshot"))] == 0
    asyncio.run(sidecar.client.aclose())
    sidecar.close()


def test_an_event_publishes_a_fresh_view_that_metrics_serves_at_once(tmp_path: Path) -> None:
    """No poll cycle between the event and the scrape: the cached exposition must not be stale."""
    token = tmp_path / "token"
    token.write_text("t0ken")
    sidecar = make_sidecar(StubEngine(), tmp_path / "state", events_token_file=token)
    app = build_app(sidecar.loop, sidecar.cache, sidecar.status, sidecar.events_token)

    async def go() -> tuple[str, str, int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://sidecar") as client:
            await sidecar.loop.cycle()
            before = (await client.get("/metrics")).text
            cycles = sidecar.loop.view.cycles
            resp = await client.post("/restore/events", json={"id": "e1", "event": "drain_started"},
                                     headers={"Authorization": "Bearer t0ken"})
            assert resp.status_code == 200
            assert sidecar.loop.view.cycles == cycles  # published without a cycle
            after = (await client.get("/metrics")).text
        await sidecar.client.aclose()
        return before, after, cycles

    before, after, _ = asyncio.run(go())
    sidecar.close()
    assert "helios_restore_window_open 0.0" in before
    assert "helios_restore_window_open 1.0" in after
    assert 'helios_restore_events_total{event="drain_started",result="accepted"} 1.0' in after
