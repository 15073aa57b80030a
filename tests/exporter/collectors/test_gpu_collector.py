"""Pure parts of the NVML source and the GPU collector on hand-built reports (no library)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from exporter.collectors.gpu import GpuCollector
from exporter.cycle.gpu_selection import GpuSelection, advance
from exporter.labels import ErrorReason
from exporter.snapshot.model import Rank, Snapshot
from exporter.sources.base import Result
from exporter.sources.gpu_report import (
    THROTTLE_REASONS,
    GpuReport,
    GpuStats,
    sanitize,
    throttle_reasons,
)


def test_throttle_reasons_closed_set() -> None:
    assert throttle_reasons(0) == ()
    assert throttle_reasons(0x1) == ("gpu_idle",)
    assert throttle_reasons(0x4 | 0x80) == ("sw_power_cap", "hw_power_brake_slowdown")
    assert throttle_reasons(0x1FF) == THROTTLE_REASONS[:-1]
    # BoardLimit (0x200), Reliability (0x400) and future bits are not in the set.
    assert throttle_reasons(0x200) == ("other",)
    assert throttle_reasons(0x100 | 1 << 40) == ("display_clock_setting", "other")
    assert len(THROTTLE_REASONS) == 10


def test_sanitize_bounds_driver_strings() -> None:
    assert sanitize("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3"
    assert sanitize("GPU-1f0c2a3b-0000-4000-8000-00000000aaaa", 96).endswith("aaaa")
    assert sanitize('a"b\\c\nd}') == "a_b_c_d_"
    assert sanitize("") == sanitize(None) == "unknown"
    assert sanitize("\x00\x01") == "__"
    assert len(sanitize("x" * 1000)) == 64
    assert sanitize("  padded  ") == "padded"


def _report() -> Result[GpuReport]:
    gpus = (
        GpuStats(index=0, uuid="GPU-a", up=True, name="NVIDIA H200", memory_used_bytes=1024,
                 memory_total_bytes=2048, power_watts=100.5, throttle_reasons=("sw_power_cap",),
                 ecc_corrected=None, ecc_uncorrected=3),
        GpuStats(index=1, uuid="GPU-b", up=False, down_reason=ErrorReason.GPU_LOST),
    )
    return Result(GpuReport("560.35.03", gpus), 1.0, 0.01)


def test_collector_renders_only_what_was_read() -> None:
    snap = Snapshot("g-1", False, None, None, None, (Rank(0, "GPU-b"), Rank(1, "GPU-a")), None)
    reg = CollectorRegistry(auto_describe=False)
    selected = advance(GpuSelection(), snap.ranks, _report().value)
    reg.register(GpuCollector(lambda: selected, lambda: snap))
    text = generate_latest(reg).decode()
    samples = sorted(line for line in text.splitlines() if not line.startswith("#"))
    assert samples == sorted([
        'helios_gpu_up{gpu="0",uuid="GPU-a"} 1.0',
        'helios_gpu_up{gpu="1",uuid="GPU-b"} 0.0',
        'helios_gpu_memory_used_bytes{gpu="0",uuid="GPU-a"} 1024.0',
        'helios_gpu_memory_total_bytes{gpu="0",uuid="GPU-a"} 2048.0',
        'helios_gpu_power_watts{gpu="0",uuid="GPU-a"} 100.5',
        *(f'helios_gpu_throttle_reason_active{{gpu="0",reason="{r}",uuid="GPU-a"}} '
          f'{1.0 if r == "sw_power_cap" else 0.0}' for r in THROTTLE_REASONS),
        'helios_gpu_ecc_errors_total{error_type="uncorrected",gpu="0",uuid="GPU-a"} 3.0',
        'helios_gpu_info{driver_version="560.35.03",gpu="0",name="NVIDIA H200",uuid="GPU-a"} '
        '1.0',
        'helios_gpu_rank_info{generation="g-1",gpu="1",rank="0",uuid="GPU-b"} 1.0',
        'helios_gpu_rank_info{generation="g-1",gpu="0",rank="1",uuid="GPU-a"} 1.0',
    ])
    assert "# TYPE helios_gpu_ecc_errors_total counter" in text


def test_collector_before_first_poll_and_failed_poll_without_history() -> None:
    # Before the first poll, and a first poll that failed: nothing known, nothing shown.
    assert advance(GpuSelection(), None, None) == GpuSelection()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(GpuCollector(GpuSelection, lambda: None))
    assert generate_latest(reg) == b""


def test_failed_poll_marks_last_known_gpus_down() -> None:
    selected = [advance(GpuSelection(), None, _report().value)]
    reg = CollectorRegistry(auto_describe=False)
    reg.register(GpuCollector(lambda: selected[-1], lambda: None))
    generate_latest(reg)
    selected.append(advance(selected[-1], None, None))  # the NVML poll hung
    text = generate_latest(reg).decode()
    samples = sorted(line for line in text.splitlines() if not line.startswith("#"))
    assert samples == ['helios_gpu_up{gpu="0",uuid="GPU-a"} 0.0',
                       'helios_gpu_up{gpu="1",uuid="GPU-b"} 0.0']
