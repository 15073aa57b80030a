"""The engine kind on the on-call view (`--engine-kind sglang|vllm`): what the engine is read
as, what it does not export, what stays unknown without a snapshot, and a kind that does not
fit, on the page and in the terminal, from `/status` as the sidecar answers it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx

from exporter.config import Config
from exporter.oncall import report
from exporter.oncall.html import page
from exporter.sidecar import build
from lab.status import text
from tests import engine_expositions
from tests.exporter.oncall.samples import NOW


def status_of(tmp_path: Path, exposition: str) -> dict[str, object]:
    def engine(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=exposition if request.url.path == "/metrics" else "")

    sidecar = build(Config(engine_url="http://e", state_dir=tmp_path, no_nvml=True,
                           engine_kind="sglang"), transport=httpx.MockTransport(engine))

    async def run() -> None:
        await sidecar.loop.cycle()
        await sidecar.client.aclose()

    try:
        asyncio.run(run())
        return sidecar.status()
    finally:
        sidecar.close()


def terminal(status: dict[str, object]) -> str:
    return re.sub(r"\s+", " ", text.render(report.build(status, NOW), width=100))


def test_the_kind_what_it_lacks_and_what_stays_unknown(tmp_path: Path) -> None:
    status = status_of(tmp_path, engine_expositions.sglang())
    view = terminal(status)
    assert "engine kind sglang (configured; mapping sglang-0.5.23)" in view
    assert "not exported" in view and "eviction_attempts" in view
    assert "drain, admission, post-restore identity checks" in view
    html = page(status, NOW)
    assert "engine kind" in html and "sglang-0.5.23" in html


def test_a_kind_that_does_not_fit_is_said(tmp_path: Path) -> None:
    view = terminal(status_of(tmp_path, engine_expositions.vllm()))
    assert "kind mismatch mismatch --engine-kind sglang: the engine's /metrics holds vllm " \
        "families" in view


def test_a_helios_sidecar_shows_no_kind(tmp_path: Path) -> None:
    from tests.helpers import StubEngine

    sidecar = build(Config(engine_url="http://e", state_dir=tmp_path, no_nvml=True),
                    transport=httpx.MockTransport(StubEngine()))
    try:
        status = sidecar.status()
    finally:
        sidecar.close()
    assert status["engine_kind"] is None
    assert "engine kind" not in terminal(status)
