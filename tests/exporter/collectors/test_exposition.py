"""/metrics: gzip negotiated and compressed once per view; one failing collector never fails the
scrape (node_exporter's per-collector success and duration)."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from structlog.testing import capture_logs

from exporter.app import build_app
from exporter.collectors.exposition import wants_gzip
from exporter.sidecar import build
from tests.helpers import StubEngine, promtool_check_metrics
from tools.harness import families, sample


class Flaky:
    """A collector that raises while `broken` says so (a real bug would, too)."""

    def __init__(self) -> None:
        self.broken: Exception | None = None

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily("process_flaky_value", "Half a family, then a failure.")
        g.add_metric([], 1.0)
        yield g
        if self.broken is not None:
            raise self.broken


class Unrenderable:
    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily("process_odd", "A sample value that is not a number.")
        g.add_metric([], "many")  # type: ignore[arg-type]
        yield g


def _sidecar(tmp_path: Path, **collectors: Any) -> Any:
    from exporter.config import Config

    config = Config(engine_url="http://engine.invalid", state_dir=tmp_path / "state", no_nvml=True)
    return build(config, transport=httpx.MockTransport(StubEngine()), **collectors)


def _client(sidecar: Any) -> httpx.AsyncClient:
    app = build_app(sidecar.loop, sidecar.cache, sidecar.status, None)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sidecar")


@pytest.mark.e2e
def test_a_failing_collector_leaves_the_rest_of_the_scrape(tmp_path: Path) -> None:
    flaky = Flaky()
    sidecar = _sidecar(tmp_path, process=flaky)

    async def go() -> list[httpx.Response]:
        async with _client(sidecar) as c:
            await sidecar.loop.cycle()
            healthy = await c.get("/metrics")
            flaky.broken = RuntimeError("no /proc for you")
            out = [healthy]
            for _ in range(3):  # three renders of three views, one log line
                await sidecar.loop.cycle()
                out.append(await c.get("/metrics"))
                out.append(await c.get("/metrics", headers={"Accept": "application/openmetrics-text"}))
            flaky.broken = None
            await sidecar.loop.cycle()
            out.append(await c.get("/metrics"))
        await sidecar.client.aclose()
        return out

    with capture_logs() as logs:
        healthy, broken, broken_om, *_, recovered = asyncio.run(go())
    sidecar.close()
    for answer in (healthy, broken, recovered):
        assert answer.status_code == 200
        promtool_check_metrics(answer.content)
    assert list(openmetrics_families(broken_om.text))  # parses: promtool reads text only
    fams = families(broken.content)
    assert sample(fams, "helios_exporter_collector_success", collector="process") == 0
    assert "process_flaky_value" not in fams  # none of its half-done output
    for name in ("offload", "restore", "exporter", "http", "build_info", "platform"):
        assert sample(fams, "helios_exporter_collector_success", collector=name) == 1, name
    assert sample(fams, "helios_engine_up") == 1 and "python_info" in fams
    assert broken_om.text.endswith("# EOF\n") and broken_om.text.count("# EOF") == 1
    assert 'helios_exporter_collector_success{collector="process"} 0.0' in broken_om.text
    assert sample(families(healthy.content), "process_flaky_value") == 1
    assert sample(families(recovered.content), "helios_exporter_collector_success",
                  collector="process") == 1
    failed = [e for e in logs if e["event"] == "collector_failed"]
    assert len(failed) == 1, failed
    assert failed[0]["collector"] == "process" and failed[0]["cause"].startswith(
        "RuntimeError at test_exposition.py:")
    assert [e["collector"] for e in logs if e["event"] == "collector_recovered"] == ["process"]


@pytest.mark.e2e
def test_a_collector_whose_output_cannot_be_rendered(tmp_path: Path) -> None:
    sidecar = _sidecar(tmp_path, platform=Unrenderable())
    asyncio.run(sidecar.loop.cycle())
    body = sidecar.cache.render(False)
    asyncio.run(sidecar.client.aclose())
    sidecar.close()
    promtool_check_metrics(body)
    fams = families(body)
    assert sample(fams, "helios_exporter_collector_success", collector="platform") == 0
    assert "process_odd" not in fams


@pytest.mark.parametrize("faulty", [None, "process", "platform"])
def test_status_learns_collector_health_without_rendering_metrics(tmp_path: Path,
                                                                  faulty: str | None) -> None:
    """/status says what /metrics says of each collector (one that raises, one whose output
    cannot be rendered), and renders no /metrics body to learn it."""
    broken = {} if faulty is None else {faulty: Flaky() if faulty == "process" else Unrenderable()}
    if faulty == "process":
        broken["process"].broken = RuntimeError("no /proc for you")
    sidecar = _sidecar(tmp_path, **broken)
    asyncio.run(sidecar.loop.cycle())
    before = sidecar.status()["collectors"]
    renders = sidecar.cache.renders
    fams = families(sidecar.cache.render(False))
    after = sidecar.status()["collectors"]
    asyncio.run(sidecar.client.aclose())
    sidecar.close()
    assert renders == 0
    assert before == after
    assert {c["collector"]: float(c["ok"]) for c in before} == {
        s.labels["collector"]: s.value for s in fams["helios_exporter_collector_success"].samples}
    assert [c["collector"] for c in before if not c["ok"]] == ([] if faulty is None else [faulty])


def test_collector_durations_are_measured_per_collector(tmp_path: Path) -> None:
    ticks = iter(range(1000))
    sidecar = _sidecar(tmp_path, timer=lambda: float(next(ticks)))
    fams = families(sidecar.cache.render(False))
    asyncio.run(sidecar.client.aclose())
    sidecar.close()
    # Every collector read the timer twice, one tick apart (the poll loop's timer is the same).
    durations = {s.labels["collector"]: s.value
                 for s in fams["helios_exporter_collector_duration_seconds"].samples}
    assert set(durations) == set(sidecar.registry.names)
    assert set(durations.values()) == {1.0}


@pytest.mark.e2e
@pytest.mark.parametrize("om", [False, True])
def test_gzip_is_negotiated_and_decompresses_to_the_identity_body(tmp_path: Path, om: bool) -> None:
    sidecar = _sidecar(tmp_path)
    accept = {"Accept": "application/openmetrics-text; version=1.0.0"} if om else {}

    async def go() -> tuple[httpx.Response, list[tuple[httpx.Headers, bytes]], int, int]:
        async with _client(sidecar) as c:
            await sidecar.loop.cycle()
            plain = await c.get("/metrics", headers={**accept, "Accept-Encoding": "identity"})
            # httpx would decode transparently: read the raw bytes instead.
            zipped = []
            for _ in range(50):
                async with c.stream("GET", "/metrics", headers={
                        **accept, "Accept-Encoding": "gzip, deflate;q=0.5"}) as resp:
                    raw = b"".join([chunk async for chunk in resp.aiter_raw()])
                    zipped.append((resp.headers, raw))
            renders, compressions = sidecar.cache.renders, sidecar.cache.compressions
        await sidecar.client.aclose()
        return plain, zipped, renders, compressions

    plain, zipped, renders, compressions = asyncio.run(go())
    sidecar.close()
    assert "content-encoding" not in plain.headers
    assert plain.headers["vary"] == "Accept-Encoding"
    headers, first = zipped[0]
    assert headers["content-encoding"] == "gzip" and headers["vary"] == "Accept-Encoding"
    assert headers["content-type"] == plain.headers["content-type"]
    assert int(headers["content-length"]) == len(first) < len(plain.content) / 3
    assert gzip.decompress(first) == plain.content
    assert all(raw == first for _, raw in zipped)
    # One view: rendered once and compressed once, whatever the number of scrapes.
    assert (renders, compressions) == (1, 1)
    if om:
        assert list(openmetrics_families(gzip.decompress(first).decode()))
    else:
        promtool_check_metrics(gzip.decompress(first))


def test_a_new_view_is_compressed_again(tmp_path: Path) -> None:
    sidecar = _sidecar(tmp_path)
    asyncio.run(sidecar.loop.cycle())
    one = sidecar.cache.render(False, True)
    assert sidecar.cache.render(False, True) is one
    asyncio.run(sidecar.loop.cycle())
    two = sidecar.cache.render(False, True)
    asyncio.run(sidecar.client.aclose())
    sidecar.close()
    assert sidecar.cache.compressions == 2 and two is not one


@pytest.mark.parametrize(("header", "gz"), [
    (None, False), ("", False), ("identity", False), ("gzip", True), ("GZIP", True),
    ("deflate, gzip;q=1.0, *;q=0.5", True), ("gzip;q=0", False), ("gzip; q=0.001", True),
    ("*", True), ("*;q=0", False), ("br, *", True), ("gzip;q=0, *", False), ("x-gzip", True),
    ("br", False), ("gzip;q=bogus", False),
])
def test_accept_encoding(header: str | None, gz: bool) -> None:
    assert wants_gzip(header) is gz
