"""NvmlSource + GpuCollector through the real pynvml bindings into the compiled fake NVML."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from structlog.testing import capture_logs

from exporter.collectors.gpu import GpuCollector
from exporter.cycle.gpu_selection import GpuSelection, advance
from exporter.labels import ErrorReason
from exporter.snapshot.model import Rank, Snapshot
from exporter.sources.base import Result
from exporter.sources.blocking import BoundedRunner
from exporter.sources.gpu_report import GpuReport
from exporter.sources.nvml import NvmlSource
from tests.helpers import promtool_check_metrics
from tools.fake_nvml import FakeConfig, FakeLibs, init_calls

MakeSource = Callable[..., NvmlSource]
GIB = 1024**3
UUID0 = "GPU-1f0c2a3b-0000-4000-8000-00000000aaaa"
UUID1 = "GPU-77aa9e1d-0000-4000-8000-00000000bbbb"


def snapshot(*ranks: tuple[int, str], generation: str = "g-test-1") -> Snapshot:
    return Snapshot(generation=generation, generation_derived=False, started_at=None,
                    identity=None, admission=None,
                    ranks=tuple(Rank(r, u) for r, u in ranks), offload=None)


def registry(result: Result[GpuReport] | None, snap: Snapshot | None = None,
             collector: GpuCollector | None = None) -> CollectorRegistry:
    """The collector over one poll's selection, as the poll loop would leave it."""
    reg = CollectorRegistry(auto_describe=False)
    if collector is None:
        selected = advance(GpuSelection(), snap.ranks if snap else None,
                           result.value if result else None)
        collector = GpuCollector(lambda: selected, lambda: snap)
    reg.register(collector)
    return reg


def sample(reg: CollectorRegistry, metric: str, gpu: int, uuid: str,
           **labels: str) -> float | None:
    return reg.get_sample_value(metric, {"gpu": str(gpu), "uuid": uuid, **labels})


TWO_GPUS = {
    0: {"uuid": UUID0, "name": "NVIDIA H100 80GB HBM3", "mem_total": 80 * GIB,
        "mem_used": 10 * GIB, "util": 57, "power_mw": 250123, "limit_mw": 300000,
        "energy_mj": 123456789, "temp": 61, "sm_mhz": 1980, "mem_mhz": 2619,
        "reasons": hex(0x4 | 0x40 | 0x1000), "ecc_corrected": 5, "ecc_uncorrected": 0},
    1: {"uuid": UUID1, "name": "NVIDIA H100 80GB HBM3", "mem_total": 80 * GIB,
        "mem_used": 123456789, "util": 100, "power_mw": 699999, "limit_mw": 700000,
        "energy_mj": 1, "temp": 83, "sm_mhz": 1410, "mem_mhz": 1593, "reasons": 0,
        "ecc_corrected": 0, "ecc_uncorrected": 2},
}


def test_two_gpus_every_series_in_base_units(fake: FakeConfig, make_source: MakeSource) -> None:
    fake.write(count=2, gpus=TWO_GPUS, driver="550.54.15")
    result = make_source().poll()
    assert result.ok, result.message
    assert result.value is not None and len(result.value.gpus) == 2
    reg = registry(result, snapshot((0, UUID1), (1, UUID0), (2, "GPU-not-on-this-host")))

    assert sample(reg, "helios_gpu_up", 0, UUID0) == 1.0
    assert sample(reg, "helios_gpu_memory_used_bytes", 0, UUID0) == 10 * GIB
    assert sample(reg, "helios_gpu_memory_total_bytes", 0, UUID0) == 85899345920
    assert sample(reg, "helios_gpu_utilization_ratio", 0, UUID0) == 0.57
    assert sample(reg, "helios_gpu_power_watts", 0, UUID0) == 250.123
    assert sample(reg, "helios_gpu_power_limit_watts", 0, UUID0) == 300.0
    assert sample(reg, "helios_gpu_energy_joules_total", 0, UUID0) == 123456.789
    assert sample(reg, "helios_gpu_temperature_celsius", 0, UUID0) == 61.0
    assert sample(reg, "helios_gpu_sm_clock_hertz", 0, UUID0) == 1_980_000_000
    assert sample(reg, "helios_gpu_memory_clock_hertz", 0, UUID0) == 2_619_000_000
    # Volatile counters (the fake's aggregate counters are 1e6 larger).
    assert sample(reg, "helios_gpu_ecc_errors_total", 0, UUID0, error_type="corrected") == 5
    assert sample(reg, "helios_gpu_ecc_errors_total", 0, UUID0, error_type="uncorrected") == 0
    active = {r: sample(reg, "helios_gpu_throttle_reason_active", 0, UUID0, reason=r)
              for r in ("gpu_idle", "sw_power_cap", "hw_thermal_slowdown", "other",
                        "display_clock_setting")}
    assert active == {"gpu_idle": 0.0, "sw_power_cap": 1.0, "hw_thermal_slowdown": 1.0,
                      "other": 1.0, "display_clock_setting": 0.0}
    assert sample(reg, "helios_gpu_info", 0, UUID0, name="NVIDIA H100 80GB HBM3",
                  driver_version="550.54.15") == 1.0

    assert sample(reg, "helios_gpu_memory_used_bytes", 1, UUID1) == 123456789
    assert sample(reg, "helios_gpu_utilization_ratio", 1, UUID1) == 1.0
    assert sample(reg, "helios_gpu_power_watts", 1, UUID1) == 699.999
    assert sample(reg, "helios_gpu_power_limit_watts", 1, UUID1) == 700.0
    assert sample(reg, "helios_gpu_energy_joules_total", 1, UUID1) == 0.001
    assert sample(reg, "helios_gpu_ecc_errors_total", 1, UUID1, error_type="uncorrected") == 2
    assert sample(reg, "helios_gpu_throttle_reason_active", 1, UUID1, reason="other") == 0.0

    assert sample(reg, "helios_gpu_rank_info", 0, UUID0, rank="1", generation="g-test-1") == 1.0
    assert sample(reg, "helios_gpu_rank_info", 1, UUID1, rank="0", generation="g-test-1") == 1.0
    promtool_check_metrics(generate_latest(reg))
    text = generate_latest(reg).decode()
    assert "GPU-not-on-this-host" not in text
    assert text.count("helios_gpu_rank_info{") == 2
    assert text.count('helios_gpu_throttle_reason_active{gpu="0"') == 10  # closed set, all shown


def test_eight_gpus(fake: FakeConfig, make_source: MakeSource) -> None:
    gpus = {i: {"uuid": f"GPU-{i:08x}-eight", "mem_total": 141 * GIB, "mem_used": i * GIB,
                "util": 10 * i, "power_mw": 100000 + i * 1000, "limit_mw": 700000,
                "energy_mj": i * 1_000_000, "temp": 40 + i, "sm_mhz": 1000 + i,
                "mem_mhz": 3200, "reasons": 1 << i}
            for i in range(8)}
    fake.write(count=8, gpus=gpus)
    result = make_source().poll()
    assert result.ok and result.value is not None
    assert [g.index for g in result.value.gpus] == list(range(8))
    reg = registry(result)
    names = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
             "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
             "hw_power_brake_slowdown")
    for i in range(8):
        uuid = f"GPU-{i:08x}-eight"
        assert sample(reg, "helios_gpu_up", i, uuid) == 1.0
        assert sample(reg, "helios_gpu_memory_used_bytes", i, uuid) == i * GIB
        assert sample(reg, "helios_gpu_memory_total_bytes", i, uuid) == 141 * GIB
        assert sample(reg, "helios_gpu_utilization_ratio", i, uuid) == pytest.approx(i / 10)
        assert sample(reg, "helios_gpu_power_watts", i, uuid) == 100.0 + i
        assert sample(reg, "helios_gpu_energy_joules_total", i, uuid) == i * 1000.0
        assert sample(reg, "helios_gpu_temperature_celsius", i, uuid) == 40.0 + i
        assert sample(reg, "helios_gpu_sm_clock_hertz", i, uuid) == (1000 + i) * 1e6
        assert sample(reg, "helios_gpu_throttle_reason_active", i, uuid, reason=names[i]) == 1.0
        others = [sample(reg, "helios_gpu_throttle_reason_active", i, uuid, reason=n)
                  for n in names if n != names[i]]
        assert others == [0.0] * 7


def test_driver_strings_are_sanitised(fake: FakeConfig, make_source: MakeSource) -> None:
    fake.write(count=1, gpus={0: {"name": 'NVIDIA "H100"} {evil="x"é' + "A" * 60}},
               driver="550.54.15\t<beta>")
    result = make_source().poll()
    assert result.value is not None
    gpu = result.value.gpus[0]
    assert gpu.name is not None and len(gpu.name) == 64
    assert gpu.name.startswith("NVIDIA _H100__ _evil__x__A")
    assert result.value.driver_version == "550.54.15__beta_"
    text = generate_latest(registry(result)).decode()
    assert "evil=" not in text


def test_lost_gpu_is_down_alone_and_recovers(fake: FakeConfig, make_source: MakeSource) -> None:
    fake.write(count=2, gpus=TWO_GPUS)
    source = make_source()
    assert source.poll().ok
    fake.write(count=2, gpus={0: TWO_GPUS[0], 1: {**TWO_GPUS[1], "lost": 1}})
    with capture_logs() as logs:
        lost = [source.poll() for _ in range(3)]
    for result in lost:
        assert result.ok  # the source as a whole stays up
        assert result.value is not None
        gpu0, gpu1 = result.value.gpus
        assert gpu0.up and gpu0.power_watts == 250.123
        assert not gpu1.up and gpu1.down_reason is ErrorReason.GPU_LOST
        assert gpu1.uuid == UUID1 and gpu1.power_watts is None
    reg = registry(lost[-1], snapshot((0, UUID0), (1, UUID1)))
    assert sample(reg, "helios_gpu_up", 1, UUID1) == 0.0
    assert sample(reg, "helios_gpu_power_watts", 1, UUID1) is None
    assert sample(reg, "helios_gpu_info", 1, UUID1, name="NVIDIA H100 80GB HBM3",
                  driver_version="550.54.15") is None
    gpu1_series = {s.name for m in reg.collect() for s in m.samples if s.labels.get("gpu") == "1"}
    assert gpu1_series == {"helios_gpu_up", "helios_gpu_rank_info"}
    assert sample(reg, "helios_gpu_rank_info", 1, UUID1, rank="1", generation="g-test-1") == 1.0
    assert sample(reg, "helios_gpu_up", 0, UUID0) == 1.0
    assert sample(reg, "helios_gpu_power_watts", 0, UUID0) == 250.123
    assert [e["event"] for e in logs] == ["gpu_down"]  # once, not once per poll

    fake.write(count=2, gpus=TWO_GPUS)
    with capture_logs() as logs:
        back = source.poll()
    assert back.value is not None and back.value.gpus[1].up
    reg = registry(back)
    assert sample(reg, "helios_gpu_up", 1, UUID1) == 1.0
    assert sample(reg, "helios_gpu_power_watts", 1, UUID1) == 699.999
    assert [e["event"] for e in logs] == ["gpu_recovered"]


def test_gpu_lost_before_first_read_has_empty_uuid(fake: FakeConfig,
                                                   make_source: MakeSource) -> None:
    fake.write(count=2, gpus={0: TWO_GPUS[0], 1: {"lost": 1}})
    result = make_source().poll()
    assert result.ok and result.value is not None
    assert result.value.gpus[1].uuid == ""
    assert registry(result).get_sample_value("helios_gpu_up", {"gpu": "1", "uuid": ""}) == 0.0


def test_not_supported_and_function_not_found_fields(fake: FakeConfig,
                                                     make_source: MakeSource) -> None:
    gpus = {0: {**TWO_GPUS[0],
                "unsupported": "nvmlDeviceGetPowerUsage,nvmlDeviceGetTotalEccErrors"},
            1: {**TWO_GPUS[1], "missing": "nvmlDeviceGetEnforcedPowerLimit"}}
    fake.write(count=2, gpus=gpus)
    source = make_source()
    with capture_logs() as logs:
        results = [source.poll() for _ in range(4)]
    assert all(r.ok for r in results)
    reg = registry(results[-1])
    assert sample(reg, "helios_gpu_power_watts", 0, UUID0) is None
    assert sample(reg, "helios_gpu_ecc_errors_total", 0, UUID0, error_type="corrected") is None
    assert sample(reg, "helios_gpu_power_limit_watts", 0, UUID0) == 300.0
    assert sample(reg, "helios_gpu_power_limit_watts", 1, UUID1) is None
    assert sample(reg, "helios_gpu_power_watts", 1, UUID1) == 699.999
    assert sample(reg, "helios_gpu_up", 0, UUID0) == 1.0
    noted = sorted((e["gpu"], e["field"]) for e in logs if e["event"] == "nvml_field_unavailable")
    assert noted == [(0, "ecc"), (0, "power"), (1, "power_limit")]  # once each over 4 polls


def test_old_driver_without_newer_functions(fake_libs: FakeLibs, fake: FakeConfig,
                                            make_source: MakeSource) -> None:
    fake.write(count=2, gpus=TWO_GPUS)
    source = make_source(fake_libs.old)
    with capture_logs() as logs:
        results = [source.poll() for _ in range(3)]
    assert all(r.ok for r in results)
    reg = registry(results[-1])
    # nvmlDeviceGetTotalEnergyConsumption is absent from the library: no energy series ...
    assert sample(reg, "helios_gpu_energy_joules_total", 0, UUID0) is None
    assert "helios_gpu_energy_joules" not in generate_latest(reg).decode()
    # ... while temperature and clock-event reasons fall back to the older calls.
    assert sample(reg, "helios_gpu_temperature_celsius", 0, UUID0) == 61.0
    assert sample(reg, "helios_gpu_throttle_reason_active", 0, UUID0, reason="sw_power_cap") == 1
    noted = sorted((e["gpu"], e["field"]) for e in logs if e["event"] == "nvml_field_unavailable")
    assert noted == [(0, "energy"), (1, "energy")]


def test_one_hung_gpu_does_not_stall_the_others(fake: FakeConfig,
                                                make_source: MakeSource) -> None:
    source = make_source(gpu_timeout=0.2)
    # The yardstick: a poll of both GPUs with none stuck, on this machine now. A poll held up by
    # the stuck GPU would take the hang, set at twice the bound.
    fake.write(count=2, gpus=TWO_GPUS)
    bound = 0.2 + max(0.4, 10 * _slowest(source.poll))
    fake.write(count=2, gpus=TWO_GPUS, hang="nvmlDeviceGetPowerUsage", hang_gpu=1,
               hang_ms=int(2000 * bound))
    for _ in range(2):  # the second poll does not start a second read of the stuck GPU
        t0 = time.perf_counter()
        result = source.poll()
        assert time.perf_counter() - t0 < bound
        assert result.ok and result.value is not None
        gpu0, gpu1 = result.value.gpus
        assert gpu0.up and gpu0.power_watts == 250.123
        assert not gpu1.up and gpu1.down_reason is ErrorReason.HUNG
    reg = registry(result)
    assert sample(reg, "helios_gpu_up", 1, UUID1) == 0.0  # uuid read before the stuck call
    assert sample(reg, "helios_gpu_up", 0, UUID0) == 1.0
    fake.write(count=2, gpus=TWO_GPUS)
    deadline = time.monotonic() + 2 * bound + 5
    while True:  # comes back once the stuck call returns
        result = source.poll()
        assert result.value is not None
        if result.value.gpus[1].up or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert result.value.gpus[1].up and result.value.gpus[1].uuid == UUID1


def test_hung_driver_bounded_runner_and_scrape_stay_fast(fake: FakeConfig,
                                                         make_source: MakeSource) -> None:
    fake.write(count=2, gpus=TWO_GPUS)
    source = make_source()
    runner = BoundedRunner("nvml", source.poll, 0.3)
    latest: list[Result[GpuReport]] = []
    selected = [GpuSelection()]
    collector = GpuCollector(lambda: selected[-1], lambda: None)
    reg = registry(None, collector=collector)

    async def poll() -> None:  # one poll loop cycle's NVML part
        latest.append(await runner.poll())
        selected.append(advance(selected[-1], None, latest[-1].value))

    async def scenario() -> None:
        # The yardsticks, on this machine now: a healthy cycle's NVML part and a scrape. A
        # cycle or scrape held up by the hung call would take the hang: twice the bound.
        t0 = time.perf_counter()
        await poll()
        assert latest[-1].ok
        bound = 0.3 + max(0.3, 10 * (time.perf_counter() - t0))
        scrape_bound = max(0.2, 10 * _slowest(lambda: generate_latest(reg)))
        hang = 2 * max(bound, scrape_bound)
        fake.write(count=2, gpus=TWO_GPUS, hang="nvmlDeviceGetCount_v2", hang_ms=int(1000 * hang))
        for _ in range(2):
            t0 = time.perf_counter()
            await poll()
            assert time.perf_counter() - t0 < bound
            assert latest[-1].reason is ErrorReason.HUNG
        fake.write(count=2, gpus=TWO_GPUS)
        t0 = time.perf_counter()
        text = generate_latest(reg).decode()
        assert time.perf_counter() - t0 < scrape_bound  # not held up by the hang
        assert f'helios_gpu_up{{gpu="0",uuid="{UUID0}"}} 0.0' in text
        assert f'helios_gpu_up{{gpu="1",uuid="{UUID1}"}} 0.0' in text
        assert "helios_gpu_power_watts" not in text
        deadline = time.monotonic() + hang + 5
        while time.monotonic() < deadline:  # the stuck call returns, then polls succeed again
            await asyncio.sleep(0.1)
            await poll()
            if latest[-1].ok:
                break
        assert latest[-1].ok

    try:
        asyncio.run(scenario())
    finally:
        runner.close()
    assert reg.get_sample_value("helios_gpu_up", {"gpu": "1", "uuid": UUID1}) == 1.0


def test_no_library_reason_library_logged_once(tmp_path: Path, fake: FakeConfig) -> None:
    source = NvmlSource(str(tmp_path / "absent" / "libnvidia-ml.so.1"))
    try:
        with capture_logs() as logs:
            results = [source.poll() for _ in range(3)]
    finally:
        source.close()
    assert [r.reason for r in results] == [ErrorReason.LIBRARY] * 3
    assert all(r.value is None for r in results)
    assert [e["event"] for e in logs] == ["nvml_unavailable"]
    assert logs[0]["log_level"] == "warning"
    text = generate_latest(registry(results[-1])).decode()
    assert "helios_gpu" not in text


def test_driver_unloaded_then_reinitialised(fake_libs: FakeLibs, fake: FakeConfig,
                                            make_source: MakeSource) -> None:
    fake.write(count=2, gpus=TWO_GPUS)
    source = make_source()
    assert source.poll().ok
    inits = init_calls(fake_libs.full)
    # The driver goes away under a running sidecar: calls fail "uninitialized", init fails.
    fake.write(count=2, gpus=TWO_GPUS, error=1, init_error=9)
    with capture_logs() as logs:
        gone = source.poll()
        again = source.poll()
    assert gone.reason is ErrorReason.DRIVER
    assert again.reason is ErrorReason.LIBRARY
    assert [e["event"] for e in logs] == ["nvml_driver_lost"]  # one line for the outage
    assert init_calls(fake_libs.full) == inits + 1
    fake.write(count=2, gpus=TWO_GPUS)
    back = source.poll()
    assert back.ok and back.value is not None and all(g.up for g in back.value.gpus)
    assert init_calls(fake_libs.full) == inits + 2


def test_driver_missing_at_start_then_loaded(fake: FakeConfig, make_source: MakeSource) -> None:
    fake.write(count=1, init_error=9)
    source = make_source()
    assert source.poll().reason is ErrorReason.LIBRARY
    fake.write(count=1)
    result = source.poll()
    assert result.ok and result.value is not None and len(result.value.gpus) == 1


def test_default_soname_lookup(fake_libs: FakeLibs, fake: FakeConfig) -> None:
    """NvmlSource() with no path lets pynvml dlopen libnvidia-ml.so.1 the usual way."""
    fake.write(count=3)
    code = ("from exporter.sources.nvml import NvmlSource\n"
            "r = NvmlSource().poll()\n"
            "print('RESULT', r.reason, len(r.value.gpus) if r.value else -1)\n")
    root = Path(__file__).parents[3]
    env = {"LD_LIBRARY_PATH": str(fake_libs.full.parent),
           "FAKE_NVML_CONFIG": str(fake_libs.config_path), "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=30, check=True, cwd=root)
    assert out.stdout.splitlines()[-1] == "RESULT None 3"
    assert "nvml_initialized" in out.stdout


def _slowest(call: Callable[[], object], times: int = 3) -> float:
    """The slowest of `times` calls of `call`, in seconds."""
    took = []
    for _ in range(times):
        t0 = time.perf_counter()
        call()
        took.append(time.perf_counter() - t0)
    return max(took)
