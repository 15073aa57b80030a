"""NVML poll cost per GPU: NvmlSource.poll() through the real pynvml bindings.

    .venv/bin/python bench/nvml_poll.py                 # fake driver, 1 / 2 / 8 GPUs
    .venv/bin/python bench/nvml_poll.py --gpus 1 4 16   # other fake sizes
    .venv/bin/python bench/nvml_poll.py --real          # the machine's libnvidia-ml.so.1

The fake (tools/fake_nvml.c, compiled here with cc against the nvidia-nvml-dev nvml.h) answers
from a table it re-reads on change, so its figures are the cost of the bindings, the per-GPU
threads and the conversions; a real driver adds its own time per call (typically tens of
microseconds, more for power and ECC on some boards).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exporter.sources.nvml import NvmlSource  # noqa: E402
from tools.fake_nvml import FakeConfig, build  # noqa: E402


def measure(source: NvmlSource, polls: int) -> tuple[list[float], int]:
    first = source.poll()  # init + first function-pointer lookups
    if not first.ok or first.value is None:
        raise SystemExit(f"poll failed: {first.reason}: {first.message}")
    gpus = len(first.value.gpus)
    times = []
    for _ in range(polls):
        t0 = time.perf_counter()
        result = source.poll()
        times.append(time.perf_counter() - t0)
        assert result.ok, result.message
    return times, gpus


def report(label: str, times: list[float], gpus: int) -> None:
    ms = sorted(t * 1000 for t in times)
    median = statistics.median(ms)
    p95 = ms[int(len(ms) * 0.95) - 1]
    per_gpu = median / gpus if gpus else float("nan")
    print(f"{label:<14} gpus={gpus:<3} polls={len(ms):<5} min={ms[0]:7.3f} ms  "
          f"median={median:7.3f} ms  p95={p95:7.3f} ms  max={ms[-1]:7.3f} ms  "
          f"median/gpu={per_gpu:6.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", action="store_true", help="use the installed NVIDIA driver")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 8],
                        help="fake GPU counts (default 1 2 8)")
    parser.add_argument("--polls", type=int, default=200, help="timed polls per size")
    args = parser.parse_args()

    if args.real:
        source = NvmlSource()
        try:
            times, gpus = measure(source, args.polls)
        finally:
            source.close()
        report("real driver", times, gpus)
        return

    with tempfile.TemporaryDirectory(prefix="fake-nvml-") as tmp:
        lib = build(Path(tmp) / "lib")
        config = FakeConfig(Path(tmp) / "gpus.conf")
        os.environ["FAKE_NVML_CONFIG"] = str(config.path)
        for count in args.gpus:
            config.write(count=count, gpus={i: {"util": 50, "reasons": 4} for i in range(count)})
            source = NvmlSource(str(lib))
            try:
                times, gpus = measure(source, args.polls)
            finally:
                source.close()
            report("fake driver", times, gpus)


if __name__ == "__main__":
    main()
