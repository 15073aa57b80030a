"""/metrics under load: the sidecar against Debian's prometheus-node-exporter, same load generator.

    .venv/bin/python bench/scrape_load.py [--duration 15] [--clients 1 8 50] [--json PATH]

Starts on 127.0.0.1: the simulated engine (`steady`), the sidecar (`serve --no-nvml
--poll-interval 1`, so the cached exposition is re-rendered once a second during the load) and
`prometheus-node-exporter` (default collectors, `--web.max-requests=0`: its default of 40 parallel
scrapes answers 503 beyond that, which would turn the 50-client point into an error count). Then,
for each client count, `wrk --latency` against each target for the same duration, alternating
which target goes first. wrk (C, epoll) is a closed loop: each connection sends its next request
when the previous answer arrived; latency is per request, percentiles from wrk's own histogram
(read by a Lua `done` hook). Reported per point: requests/s, p50/p90/p99/max, errors (connect,
read, write, timeout, non-2xx), the CPU share of wrk itself, of the server and of the simulated
engine, and how busy the whole machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (
    Procs,
    cpu_share,
    host_cpu_busy,
    install_sigterm,
    loadavg,
    proc_sample,
    write_json,
)

LUA = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %d, "duration_us": %d, "bytes": %d, "connect": %d, "read": %d, ' ..
    '"write": %d, "status": %d, "timeout": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, ' ..
    '"max_us": %d, "mean_us": %.1f, "stdev_us": %.1f}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean, latency.stdev))
end
"""


def run_wrk(url: str, clients: int, duration: float, workdir: Path, label: str,
            threads: int = 2, timeout_s: int = 10, headers: list[str] = ()  # type: ignore[assignment]
            ) -> dict[str, Any]:
    """One wrk run; returns wrk's figures plus the CPU wrk itself used (from wait4). `headers`:
    extra request headers, "Name: value"."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk not on PATH (bench/run installs it)")
    script = workdir / "report.lua"
    if not script.exists():
        script.write_text(LUA)
    out_path = workdir / f"wrk-{label}.out"
    args = [wrk, f"-t{min(threads, clients)}", f"-c{clients}", f"-d{duration:g}s",
            f"--timeout={timeout_s}s", *(a for h in headers for a in ("-H", h)), "--latency",
            "-s", str(script), url]
    with out_path.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = out_path.read_text(errors="replace")
    line = next((ln for ln in text.splitlines() if ln.startswith("WRKJSON ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed (exit {proc.returncode}):\n{text[-2000:]}")
    data: dict[str, Any] = json.loads(line.removeprefix("WRKJSON "))
    data["cpu_s"] = usage.ru_utime + usage.ru_stime
    data["args"] = " ".join(["wrk", *args[1:-3], "-s report.lua", url])
    return data


def point(target: str, url: str, clients: int, duration: float, workdir: Path,
          pids: dict[str, int]) -> dict[str, Any]:
    before = {name: proc_sample(pid) for name, pid in pids.items()}
    busy0, total0 = host_cpu_busy()
    t0 = time.monotonic()
    wrk = run_wrk(url, clients, duration, workdir, f"{target}-c{clients}")
    wall = time.monotonic() - t0
    busy1, total1 = host_cpu_busy()
    after = {name: proc_sample(pid) for name, pid in pids.items()}
    secs = wrk["duration_us"] / 1e6
    errors = {k: wrk[k] for k in ("connect", "read", "write", "timeout", "status")}
    return {
        "target": target, "clients": clients, "duration_s": round(secs, 3),
        "requests": wrk["requests"], "rps": wrk["requests"] / secs,
        "bytes_per_response": wrk["bytes"] / wrk["requests"] if wrk["requests"] else None,
        "p50_ms": wrk["p50_us"] / 1000, "p90_ms": wrk["p90_us"] / 1000,
        "p99_ms": wrk["p99_us"] / 1000, "max_ms": wrk["max_us"] / 1000,
        "mean_ms": wrk["mean_us"] / 1000,
        "errors": errors, "errors_total": sum(errors.values()),
        "wrk_cpu_share": wrk["cpu_s"] / wall,
        "cpu_share": {name: cpu_share(before[name], after[name]) for name in pids},
        "machine_busy_share": (busy1 - busy0) / (total1 - total0) if total1 > total0 else None,
        "loadavg_after": loadavg(),
        "wrk_args": wrk["args"],
    }


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    procs = Procs(workdir)
    points: list[dict[str, Any]] = []
    try:
        engine, engine_url = procs.simulator()
        sidecar, sidecar_url = procs.sidecar(engine_url, "--poll-interval", "1")
        node, node_url = procs.node_exporter("--web.max-requests=0")
        targets = {"sidecar": (sidecar_url + "/metrics", sidecar.pid),
                   "node-exporter": (node_url + "/metrics", node.pid)}
        bodies = {name: len(httpx.get(url, timeout=10).content)
                  for name, (url, _) in targets.items()}
        series = {name: sum(1 for ln in httpx.get(url, timeout=10).text.splitlines()
                            if ln and not ln.startswith("#"))
                  for name, (url, _) in targets.items()}
        for name, (url, _) in targets.items():  # warm-up: connections, caches, JIT-less paths
            run_wrk(url, 8, args.warmup, workdir, f"warmup-{name}")
        order = list(targets)
        for i, clients in enumerate(args.clients):
            for name in order if i % 2 == 0 else list(reversed(order)):
                url, pid = targets[name]
                pids = {"server": pid, "engine": engine.pid}
                result = point(name, url, clients, args.duration, workdir, pids)
                print(f"{name:<14} c={clients:<3} {result['rps']:9.1f} req/s  p50 "
                      f"{result['p50_ms']:8.2f} ms  p99 {result['p99_ms']:8.2f} ms  errors "
                      f"{result['errors_total']}  wrk cpu {result['wrk_cpu_share']:.0%}  "
                      f"server cpu {result['cpu_share']['server']:.0%}", file=sys.stderr)
                points.append(result)
        for name in ("sidecar", "node-exporter"):
            if not {"sidecar": sidecar, "node-exporter": node}[name].alive():
                raise RuntimeError(f"{name} died during the load")
    finally:
        procs.stop_all()
    return {
        "benchmark": "scrape_load",
        "load_generator": "wrk (C, epoll, 2 threads, closed loop, --latency, Lua done hook)",
        "duration_s": args.duration, "warmup_s": args.warmup, "clients": args.clients,
        "sidecar_args": "serve --no-nvml --poll-interval 1 (against simulate --scenario steady)",
        "node_exporter_args": "--web.max-requests=0 (default collectors)",
        "body_bytes": bodies, "sample_lines": series, "points": points,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per point")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per target")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 50],
                        help="connection counts (1: one keep-alive connection, as Prometheus)")
    parser.add_argument("--json", type=Path, metavar="PATH")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    install_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-scrape-") as tmp:
        result = run(args, args.workdir or Path(tmp))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
