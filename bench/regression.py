"""Quick regression benchmark for CI: fails only when a figure lost an order of magnitude.

    .venv/bin/python bench/regression.py [--duration 3] [--json PATH]

scripts/test runs it before the test suite (about 25 s). It reuses the sections of bench/run on a
smaller scale and judges two figures with a wide margin below the goals of docs/benchmarks.md
(bench/report/report.py's GOALS), so that a noisy, shared CI machine does not fail it but a regression
like a lost TCP_NODELAY (every keep-alive answer waiting ~40 ms for a delayed ACK) does:

- keep-alive /metrics throughput, as a ratio to Debian's prometheus-node-exporter measured side
  by side in the same run with the same wrk load (bench/scrape_load.py), on 1 and on 8
  connections: fails below 3x (the goal is 10x);
- CPU of one poll cycle against the example snapshot and the real SGLang /metrics, median over
  in-process cycles (bench/poll_cost.py): fails above 5x its 5 ms goal.

Exit 0 when both hold, 1 when one does not, 2 when something could not be measured.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` importable
import poll_cost
import scrape_load
from benchlib import Procs, install_sigterm, write_json

from bench.report.report import GOALS

THROUGHPUT_FLOOR = 3.0  # sidecar req/s over node-exporter's, at least (goal: GOALS["throughput"])
CYCLE_FACTOR = 5.0  # poll cycle CPU median at most this times GOALS["cycle_cpu_ms"]
CLIENTS = (1, 8)


def judge(figures: dict[str, Any]) -> list[str]:
    """What failed, one line each; empty when every figure is within its margin."""
    failed = []
    for clients, point in sorted(figures["throughput"].items()):
        if point["ratio"] < THROUGHPUT_FLOOR:
            failed.append(
                f"/metrics throughput on {clients} keep-alive connection(s): {point['ratio']:.1f}x "
                f"node-exporter's ({point['sidecar_rps']:,.0f} vs {point['node_rps']:,.0f} "
                f"req/s), below the {THROUGHPUT_FLOOR:g}x floor (goal {GOALS['throughput']:g}x)")
    limit = CYCLE_FACTOR * GOALS["cycle_cpu_ms"]
    if figures["cycle_cpu_median_ms"] > limit:
        failed.append(f"poll cycle CPU median {figures['cycle_cpu_median_ms']:.2f} ms, above "
                      f"{limit:g} ms ({CYCLE_FACTOR:g}x the {GOALS['cycle_cpu_ms']:g} ms goal)")
    return failed


def measure_scrapes(duration: float, workdir: Path) -> dict[int, dict[str, Any]]:
    """wrk against the sidecar and node-exporter for each connection count, alternating which
    goes first, after a short warm-up of each."""
    procs = Procs(workdir)
    out: dict[int, dict[str, Any]] = {}
    try:
        engine, engine_url = procs.simulator()
        sidecar, sidecar_url = procs.sidecar(engine_url, "--poll-interval", "1")
        node, node_url = procs.node_exporter("--web.max-requests=0")
        targets = {"sidecar": (sidecar_url + "/metrics", sidecar.pid),
                   "node-exporter": (node_url + "/metrics", node.pid)}
        for name, (url, _) in targets.items():
            scrape_load.run_wrk(url, 1, 1, workdir, f"warmup-{name}")
        for i, clients in enumerate(CLIENTS):
            order = list(targets) if i % 2 == 0 else list(reversed(targets))
            rps, p50 = {}, {}
            for name in order:
                url, pid = targets[name]
                point = scrape_load.point(name, url, clients, duration, workdir,
                                          {"server": pid, "engine": engine.pid})
                if point["errors_total"]:
                    raise RuntimeError(f"{name}: {point['errors']} errors under {clients} "
                                       "connection(s)")
                rps[name], p50[name] = point["rps"], point["p50_ms"]
            out[clients] = {"sidecar_rps": rps["sidecar"], "node_rps": rps["node-exporter"],
                            "ratio": rps["sidecar"] / rps["node-exporter"],
                            "sidecar_p50_ms": p50["sidecar"], "node_p50_ms": p50["node-exporter"]}
        if not (sidecar.alive() and node.alive()):
            raise RuntimeError("a server died during the load")
    finally:
        procs.stop_all()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per wrk point")
    parser.add_argument("--cycles", type=int, default=200, help="poll cycles measured")
    parser.add_argument("--json", type=Path, metavar="PATH")
    args = parser.parse_args()
    install_sigterm()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-regression-") as tmp:
            work = Path(tmp)
            (work / "state").mkdir()
            cycle = asyncio.run(poll_cost.cycle_cost(args.cycles, 20, work / "state"))
            if not cycle["sources_up"]:  # a failing poll is cheap: its time would hide a regression
                raise RuntimeError("the in-process engine sources failed during the cycles")
            figures = {"throughput": measure_scrapes(args.duration, work / "scrape"),
                       "cycle_cpu_median_ms": cycle["cpu"]["median_ms"]}
    except Exception as exc:  # a benchmark that cannot run says why, and CI stops on it
        print(f"bench/regression.py: not measured: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for clients, p in sorted(figures["throughput"].items()):
        print(f"/metrics, {clients} keep-alive connection(s): sidecar {p['sidecar_rps']:,.0f} "
              f"req/s (p50 {p['sidecar_p50_ms']:.2f} ms), node-exporter {p['node_rps']:,.0f} "
              f"req/s (p50 {p['node_p50_ms']:.2f} ms): {p['ratio']:.1f}x "
              f"(fails below {THROUGHPUT_FLOOR:g}x)", file=sys.stderr)
    print(f"poll cycle CPU: median {figures['cycle_cpu_median_ms']:.2f} ms (fails above "
          f"{CYCLE_FACTOR * GOALS['cycle_cpu_ms']:g} ms)", file=sys.stderr)
    failed = judge(figures)
    figures["failed"] = failed
    if args.json:
        write_json(args.json, figures)
    for line in failed:
        print(f"REGRESSION: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
