"""What observing costs the engine: request latency at the client with the sidecar off, polling
every 5 s and every 1 s; matched, repeated, with the spread; and the engine-side requests and
bytes the sidecar causes per poll interval.

    .venv/bin/python bench/observer_cost.py [--reps 3] [--seconds 20] [--time-scale 100] [--json PATH]

Each repetition runs every arm once, in a rotated order (off, 5 s, 1 s; then 5 s, 1 s, off; ...),
recorded in the result. An arm is a fresh simulated engine (`simulate --scenario idle`, the same
seed every time) and, unless off, a fresh sidecar (`serve --no-nvml --poll-interval S`). The
client primes the `small-12` corpus once (so that later requests hit the host tier, a steady
state), then sends its bodies in a loop at concurrency 1 for `--seconds`, timing every request
with `time.perf_counter()` around the HTTP call. The engine's own latency histogram cannot show an
observer's cost (it records modelled latency), so only the client's clock is used.

`--time-scale` makes each request's modelled latency 1/F of real time (at 100 a hit takes about
3 ms of sleep), so the engine's CPU work per request, which the sidecar's polls compete with, is a
visible part of what the client measures. The engine-side figures come from the sidecar's own
counters (`helios_exporter_engine_requests_total`, `helios_exporter_engine_response_bytes_total`,
`helios_exporter_poll_cycles_total`) read at the end of its arm.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ROOT, Procs, install_sigterm, loadavg, percentile, write_json

sys.path.insert(0, str(ROOT))
from simulator.corpora import lane
from tools.harness import families

ARMS: tuple[tuple[str, float | None], ...] = (("off", None), ("5 s", 5.0), ("1 s", 1.0))
CORPUS = "small-12"


def _order(rep: int) -> list[tuple[str, float | None]]:
    k = rep % len(ARMS)
    return list(ARMS[k:] + ARMS[:k])


def _engine_side(sidecar_url: str) -> dict[str, Any]:
    fams = families(httpx.get(sidecar_url + "/metrics", timeout=10).text)
    requests: dict[str, float] = {}
    for s in fams["helios_exporter_engine_requests"].samples:
        if s.name.endswith("_total"):
            requests[s.labels["path"]] = requests.get(s.labels["path"], 0.0) + s.value
    body = {s.labels["path"]: s.value for s in fams["helios_exporter_engine_response_bytes"].samples
            if s.name.endswith("_total")}
    cycles = next(s.value for s in fams["helios_exporter_poll_cycles"].samples
                  if s.name.endswith("_total"))
    return {"requests_by_path": requests, "bytes_by_path": body, "poll_cycles": cycles}


def one_arm(procs: Procs, interval: float | None, seconds: float, time_scale: float,
            seed: int) -> dict[str, Any]:
    _, engine = procs.simulator("--time-scale", str(time_scale), scenario="idle", seed=seed,
                                name=f"engine-{len(procs.procs)}")
    sidecar = None
    if interval is not None:
        _, sidecar = procs.sidecar(engine, "--poll-interval", str(interval),
                                   name=f"sidecar-{len(procs.procs)}")
    bodies = [line.encode() for line in lane(CORPUS).lines()]
    latencies: list[float] = []
    failed = 0
    with httpx.Client(base_url=engine, timeout=30) as client:
        headers = {"content-type": "application/json"}
        for body in bodies:  # prime: the rest of the arm hits the host tier
            client.post("/v1/completions", content=body, headers=headers)
        started = time.monotonic()
        i = 0
        while time.monotonic() - started < seconds:
            t0 = time.perf_counter()
            resp = client.post("/v1/completions", content=bodies[i % len(bodies)],
                               headers=headers)
            elapsed = time.perf_counter() - t0
            if resp.status_code == 200:
                latencies.append(elapsed)
            else:
                failed += 1
            i += 1
        wall = time.monotonic() - started
    out: dict[str, Any] = {
        "requests": len(latencies), "failed": failed, "seconds": wall,
        "mean_ms": statistics.fmean(latencies) * 1000,
        "median_ms": statistics.median(latencies) * 1000,
        "p95_ms": percentile(latencies, 95) * 1000, "p99_ms": percentile(latencies, 99) * 1000,
    }
    if sidecar is not None:
        side = _engine_side(sidecar)
        out["engine_side"] = side
        # Per poll interval: what one cycle asks of the engine (every cycle since the sidecar
        # started, the first included), by path.
        cycles = side["poll_cycles"] or 1.0
        out["per_poll"] = {"requests": sum(side["requests_by_path"].values()) / cycles,
                           "bytes": sum(side["bytes_by_path"].values()) / cycles,
                           "bytes_by_path": {k: v / cycles
                                             for k, v in side["bytes_by_path"].items()}}
    procs.stop_all()
    procs.procs.clear()
    return out


def summarise(reps: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, _ in ARMS:
        means = [r["arms"][name]["mean_ms"] for r in reps]
        medians = [r["arms"][name]["median_ms"] for r in reps]
        arm: dict[str, Any] = {
            "rep_means_ms": means, "mean_ms": statistics.fmean(means),
            "spread_ms": max(means) - min(means), "rep_medians_ms": medians,
            "median_of_medians_ms": statistics.median(medians),
            "requests": sum(r["arms"][name]["requests"] for r in reps),
            "failed": sum(r["arms"][name]["failed"] for r in reps),
        }
        per_poll = [r["arms"][name]["per_poll"] for r in reps if "per_poll" in r["arms"][name]]
        if per_poll:
            interval = dict(ARMS)[name]
            assert interval is not None
            arm["per_poll_requests"] = statistics.fmean(p["requests"] for p in per_poll)
            arm["per_poll_bytes"] = statistics.fmean(p["bytes"] for p in per_poll)
            arm["engine_requests_per_s"] = arm["per_poll_requests"] / interval
            arm["engine_bytes_per_s"] = arm["per_poll_bytes"] / interval
        out[name] = arm
    off = out["off"]["mean_ms"]
    for name, _ in ARMS[1:]:
        out[name]["vs_off"] = (out[name]["mean_ms"] - off) / off
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per arm")
    parser.add_argument("--time-scale", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, metavar="PATH")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    install_sigterm()
    import tempfile

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-observer-"))
    procs = Procs(work)
    reps = []
    try:
        for rep in range(args.reps):
            order = _order(rep)
            arms = {}
            for name, interval in order:
                arms[name] = one_arm(procs, interval, args.seconds, args.time_scale, args.seed)
                print(f"rep {rep + 1} {name}: mean {arms[name]['mean_ms']:.3f} ms over "
                      f"{arms[name]['requests']} requests", file=sys.stderr)
            reps.append({"order": [n for n, _ in order], "arms": arms})
    finally:
        procs.stop_all()
    result = {"benchmark": "observer_cost", "corpus": CORPUS, "seconds_per_arm": args.seconds,
              "time_scale": args.time_scale, "seed": args.seed, "reps": reps,
              "summary": summarise(reps), "loadavg_after": loadavg()}
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
