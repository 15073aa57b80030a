"""Shared helpers of the bench/ scripts: /proc readings, statistics, the machine; processes on
127.0.0.1 come from tools/harness.py (shared with the tests).

Every process started through `Procs` is stopped by `Procs.stop_all()`; the section scripts call it
in a `finally`, and `install_sigterm()` turns SIGTERM into an exception so that `finally` also
runs when bench/run stops a section that overran its time bound.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from bench/: tools/ is importable

from tools import harness  # noqa: E402
from tools.harness import PYTHON, Proc, free_port, wait_http, wait_until  # noqa: E402

__all__ = ["PYTHON", "ROOT", "Proc", "Procs", "free_port", "wait_http", "wait_until"]

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


class Stopped(Exception):
    """Raised in the main thread on SIGTERM, so that `finally` blocks stop child processes."""


def install_sigterm() -> None:
    def handler(signum: int, _frame: Any) -> None:
        raise Stopped(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


class Procs(harness.Procs):
    """tools.harness.Procs with the benchmarks' engine (steady, seeded) and node_exporter."""

    def simulator(self, *extra: str, scenario: str = "steady", seed: int = 7,  # type: ignore[override]
                  name: str = "engine") -> tuple[Proc, str]:
        return super().simulator(scenario, "--seed", str(seed), *extra, name=name)

    def node_exporter(self, *extra: str) -> tuple[Proc, str]:
        binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
        if binary is None:
            raise RuntimeError("prometheus-node-exporter not on PATH (bench/run installs it)")
        port = free_port()
        proc = self.start("node-exporter", [binary, f"--web.listen-address=127.0.0.1:{port}",
                                            *extra])
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/metrics", self.ready_timeout, proc)
        return proc, url


# -- /proc ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProcSample:
    at: float  # time.monotonic()
    cpu_s: float  # utime + stime of the process (all threads)
    rss_bytes: int
    fds: int
    threads: int


def proc_sample(pid: int) -> ProcSample:
    at = time.monotonic()
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # fields from 3 (state) on
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15
    threads = int(fields[17])  # field 20
    rss_pages = int(fields[21])  # field 24
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return ProcSample(at, (utime + stime) / CLK_TCK, rss_pages * PAGE, fds, threads)


def cpu_share(a: ProcSample, b: ProcSample) -> float:
    """CPU time over wall time between two samples: 1.0 is one core fully busy."""
    return (b.cpu_s - a.cpu_s) / (b.at - a.at)


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def host_cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat: busy = total - idle - iowait."""
    values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal
    return total - values[3] - values[4], total


# -- statistics -----------------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary(values: Iterable[float]) -> dict[str, float]:
    vals = list(values)
    return {"n": len(vals), "min": min(vals), "median": statistics.median(vals),
            "p99": percentile(vals, 99), "max": max(vals), "mean": statistics.fmean(vals)}


# -- the machine ----------------------------------------------------------------------------------
def _first_line(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        return "not installed"
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=20)
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else "?"


def machine() -> dict[str, Any]:
    from importlib import metadata

    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    mhz = re.search(r"^cpu MHz\s*:\s*(.+)$", cpuinfo, re.M)
    meminfo = Path("/proc/meminfo").read_text()
    mem_kib = int(re.search(r"^MemTotal:\s*(\d+)", meminfo, re.M).group(1))  # type: ignore[union-attr]
    hypervisor = "hypervisor" in cpuinfo.split("flags", 1)[-1].split("\n", 1)[0]
    versions = {}
    for dist in ("helios-exporter", "uvicorn", "fastapi", "starlette", "httpx", "h11",
                 "httptools", "uvloop", "prometheus-client", "psutil", "nvidia-ml-py",
                 "jsonschema"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "exporter",
                            "simulator"], capture_output=True, text=True, check=False).stdout
    os_release = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]+)', os_release, re.M)
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu_model": model.group(1).strip() if model else platform.processor() or "?",
        "cpu_mhz": float(mhz.group(1)) if mhz else None,
        "virtualized": hypervisor,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "os": pretty.group(1) if pretty else platform.platform(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": versions,
        "wrk": _first_line(["wrk", "--version"]),
        "node_exporter": _first_line(["prometheus-node-exporter", "--version"]),
        "prometheus": _first_line(["prometheus", "--version"]),
        "alertmanager": _first_line(["prometheus-alertmanager", "--version"]),
        "git_commit": git or "?",
        "exporter_tree_dirty": bool(dirty.strip()),
        "loadavg_at_start": loadavg(),
    }


def write_json(path: Path | None, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, default=str) + "\n"
    if path is None:
        print(text)
    else:
        path.write_text(text)


def with_folders_named(value: Any, folders: dict[Path, str]) -> Any:
    """`value` (a result: dicts, lists, strings) with each folder of `folders` written as its
    name there (`/tmp/helios-bench-x1y2/soak` -> `WORKDIR/soak`): a recorded command or path then
    says what the folder is, not where one machine's temporary directory happened to be."""
    if isinstance(value, dict):
        return {k: with_folders_named(v, folders) for k, v in value.items()}
    if isinstance(value, list):
        return [with_folders_named(v, folders) for v in value]
    if isinstance(value, str):
        for folder, name in sorted(folders.items(), key=lambda item: -len(str(item[0].resolve()))):
            value = value.replace(str(folder.resolve()), name)
            if folder.is_absolute():  # a relative one ("run") would match inside other words
                value = value.replace(str(folder), name)
        return value
    return value
