from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog

from exporter import logs
from tests.helpers import StubEngine, make_sidecar


def test_json_lines_carry_generation_and_phase(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    import asyncio

    logs.configure("json", "info")  # binds capsys's stderr: reset below, it closes after the test
    logs.CONTEXT.clear()
    sidecar = make_sidecar(StubEngine(), tmp_path)

    async def run() -> None:
        await sidecar.poller.cycle()
        await sidecar.client.aclose()

    asyncio.run(run())
    sidecar.close()
    try:
        structlog.get_logger("t").info("after_poll", detail=1)
    finally:
        structlog.reset_defaults()
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.strip()]
    last = lines[-1]
    assert last["event"] == "after_poll"
    assert last["generation"] == "g-20261129T0412Z-7f3a"
    assert last["phase"] == "serving"
    assert last["level"] == "info" and "timestamp" in last
    logs.CONTEXT.clear()
