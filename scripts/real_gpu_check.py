"""Check the NVML source against a real NVIDIA driver: every GPU series and the poll cost.

    .venv/bin/python scripts/real_gpu_check.py [--polls 20] [--library PATH]

Needs only this package and nvidia-ml-py (`pynvml`). Prints the exposition of the GPU collector
(the series /metrics would show), which fields the driver did not provide per GPU, and the
poll time over N polls (min / median / max). Exit status: 0 when every GPU answered, 1 when a GPU
is down, 2 when NVML itself failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import structlog
from prometheus_client import CollectorRegistry, generate_latest

from exporter.collectors.gpu import GpuCollector
from exporter.cycle.gpu_selection import GpuSelection, advance
from exporter.sources.base import Result
from exporter.sources.gpu_report import GpuReport
from exporter.sources.nvml import NvmlSource

MEASURED = ("name", "memory_used_bytes", "memory_total_bytes", "utilization_ratio", "power_watts",
            "power_limit_watts", "energy_joules", "temperature_celsius", "sm_clock_hertz",
            "memory_clock_hertz", "throttle_reasons", "ecc_corrected", "ecc_uncorrected")


def main() -> int:
    parser = argparse.ArgumentParser(description="NVML source against the real driver")
    parser.add_argument("--polls", type=int, default=20, help="timed polls (default 20)")
    parser.add_argument("--library", default=None,
                        help="path of libnvidia-ml.so.1 (default: the dynamic loader's)")
    parser.add_argument("--gpu-timeout", type=float, default=1.0,
                        help="seconds one GPU's read may take before it counts as hung")
    args = parser.parse_args()
    # Logs to stderr so stdout is the exposition and the figures.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))

    source = NvmlSource(args.library, gpu_timeout=args.gpu_timeout)
    try:
        t0 = time.perf_counter()
        first = source.poll()
        init_ms = (time.perf_counter() - t0) * 1000
        if not first.ok or first.value is None:
            print(f"NVML poll failed: reason={first.reason} {first.message}")
            return 2
        times: list[float] = []
        latest: Result[GpuReport] = first
        for _ in range(args.polls):
            t0 = time.perf_counter()
            latest = source.poll()
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        source.close()

    registry = CollectorRegistry(auto_describe=False)
    every_gpu = advance(GpuSelection(), None, latest.value, all_gpus=True)
    registry.register(GpuCollector(lambda: every_gpu, lambda: None))
    print(generate_latest(registry).decode(), end="")

    report = latest.value
    if not latest.ok or report is None:
        print(f"\nlatest poll failed: reason={latest.reason} {latest.message}")
        return 2
    print(f"\n# driver {report.driver_version}, {len(report.gpus)} GPU(s)")
    for gpu in report.gpus:
        values = dataclasses.asdict(gpu)
        missing = [f for f in MEASURED if values[f] is None]
        state = "up" if gpu.up else f"DOWN ({gpu.down_reason})"
        print(f"# gpu {gpu.index} {gpu.uuid} {gpu.name}: {state}; "
              f"not provided: {', '.join(missing) or 'none'}")
    if times:
        print(f"# first poll (with nvmlInit) {init_ms:.2f} ms; {len(times)} polls: "
              f"min {min(times):.2f} ms, median {statistics.median(times):.2f} ms, "
              f"max {max(times):.2f} ms; median per GPU "
              f"{statistics.median(times) / max(1, len(report.gpus)):.2f} ms")
    return 0 if all(g.up for g in report.gpus) else 1


if __name__ == "__main__":
    sys.exit(main())
