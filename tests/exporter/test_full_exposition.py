"""The whole /metrics of a sidecar built by `exporter.sidecar.build`, against one golden file
(node_exporter's e2e-output.txt). Inputs: tests/fixtures/full_exposition/ (see its README).
Regenerate with `pytest tests/exporter/test_full_exposition.py --update-golden` and review the diff."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from prometheus_client import PlatformCollector, ProcessCollector

from exporter.collectors.build_info import BuildInfoCollector
from exporter.config import Config
from exporter.labels import ErrorReason
from exporter.restore.store import STATE_FILE
from exporter.sidecar import build
from exporter.sources.base import Result
from exporter.sources.gpu_report import GpuReport, GpuStats
from exporter.sources.host import HostReport, ProcessStats
from tests.conftest import FIXTURES, REAL
from tests.helpers import StubEngine, check_golden, contract_example
from tools.harness import families

INPUTS = FIXTURES / "full_exposition"
GOLDEN = Path(__file__).parents[1] / "golden" / "full_exposition.prom"
NOW = 1764393120.0
PLATFORM = SimpleNamespace(
    python_version_tuple=lambda: ("3", "11", "2"), python_version=lambda: "3.11.2",
    python_implementation=lambda: "CPython", system=lambda: "Linux")


def host_poll() -> Result[HostReport]:
    raw = json.loads((INPUTS / "host_report.json").read_text())
    report = HostReport(**{**raw, "engine": ProcessStats(**raw["engine"])})
    return Result(report, NOW, 0.004)


def nvml_poll() -> Result[GpuReport]:
    raw = json.loads((INPUTS / "gpu_report.json").read_text())
    gpus = []
    for gpu in raw["gpus"]:
        if "throttle_reasons" in gpu:
            gpu["throttle_reasons"] = tuple(gpu["throttle_reasons"])
        if "down_reason" in gpu:
            gpu["down_reason"] = ErrorReason(gpu["down_reason"])
        gpus.append(GpuStats(**gpu))
    return Result(GpuReport(raw["driver_version"], tuple(gpus)), NOW, 0.0035)


def full_exposition(tmp_path: Path) -> bytes:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    shutil.copy(INPUTS / "restore-state.json", state_dir / STATE_FILE)
    engine = StubEngine(contract_example(3), (REAL / "sglang_production_metrics.prom").read_text())
    config = Config(engine_url="http://engine.invalid", state_dir=state_dir, no_nvml=False)
    sidecar = build(
        config, transport=httpx.MockTransport(engine), clock=lambda: NOW, timer=lambda: 0.0,
        host=host_poll, nvml=nvml_poll,
        process=ProcessCollector(proc=str(INPUTS / "proc"), pid=lambda: 4242, registry=None),
        platform=PlatformCollector(registry=None, platform=PLATFORM),
        build_info=BuildInfoCollector("0.1.0", "3.11.2"),
    )

    async def run() -> None:
        sidecar.loop.load_state()
        await sidecar.loop.cycle()
        assert not (await sidecar.loop.keeper.apply_event("restore-1", "restore_started")).duplicate
        assert (await sidecar.loop.keeper.apply_event("drain-1", "drain_started")).duplicate
        await sidecar.client.aclose()

    try:
        asyncio.run(run())
        return sidecar.cache.render(False)
    finally:
        sidecar.close()


@pytest.mark.e2e
def test_full_exposition(tmp_path: Path, update_golden: bool) -> None:
    check_golden(full_exposition(tmp_path), GOLDEN, update_golden)


def test_full_exposition_covers_every_collector(tmp_path: Path) -> None:
    """The golden is only worth having if every collector of the registry shows in it."""
    fams = families(GOLDEN.read_text())
    for name in ("helios_engine_up", "helios_offload_slab_free", "helios_engine_native_prompt_tokens",
                 "helios_restore_window_open", "helios_restore_deadline_timestamp_seconds",
                 "helios_restore_events", "helios_exporter_source_errors",
                 "helios_exporter_engine_requests", "helios_host_memory_total_bytes",
                 "helios_engine_process_resident_bytes", "helios_gpu_up", "helios_gpu_rank_info",
                 "helios_exporter_build_info", "process_cpu_seconds", "python_info"):
        assert name in fams, name
    samples: dict[str, Any] = {s.name: s.value for f in fams.values() for s in f.samples
                               if not s.labels}
    assert samples["helios_restore_window_start_timestamp_seconds"] == NOW - 1800
    assert samples["process_start_time_seconds"] == 1764388800.0
