"""What one poll cycle costs, in process and in a real sidecar process.

    .venv/bin/python bench/poll_cost.py [--cycles 500] [--steady-seconds 60] [--json PATH]

With `cycle_sglang`, the same in-process cycles of a sidecar of `--engine-kind sglang` against
the exposition SGLang 0.5.23's own code renders (tests/fixtures/engines/), beside Helios's.

1. In process: `tools.harness.make_sidecar` with a `StubEngine` (httpx MockTransport) serving the
   example snapshot of docs/interface.md (tests/fixtures/snapshots/contract_example.json) and the
   real SGLang /metrics; `time.process_time()` around each `await loop.cycle()` (the CPU of every
   thread of this process: the event loop, the parse threads and the host source's psutil thread),
   after a warm-up. Beside it, for the analysis, the same clock around the cycle's parts called alone
   (snapshot parse + schema validation, pass-through parse and fold, host source poll) and around one
   uncached render of /metrics, which a scrape pays once per cycle.
2. Steady state: the real sidecar (`serve --no-nvml --poll-interval 1`) against the simulated
   engine (`steady`), scraped once a second like Prometheus (keep-alive connection), for
   `--steady-seconds`; its utime+stime and RSS from /proc/<pid>/stat at start and end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (
    MIB,
    ROOT,
    Procs,
    cpu_share,
    install_sigterm,
    loadavg,
    percentile,
    proc_sample,
    write_json,
)

sys.path.insert(0, str(ROOT))
SGLANG = ROOT / "tests" / "fixtures" / "real" / "sglang_production_metrics.prom"
SNAPSHOT = ROOT / "tests" / "fixtures" / "snapshots" / "contract_example.json"
SGLANG_OWN = ROOT / "tests" / "fixtures" / "engines" / "sglang-0.5.23" / "03-reuse-from-host.prom"


def _ms(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "median_ms": statistics.median(values) * 1000,
            "p99_ms": percentile(values, 99) * 1000, "min_ms": min(values) * 1000,
            "max_ms": max(values) * 1000, "mean_ms": statistics.fmean(values) * 1000}


def _cpu_times(call: Callable[[], Any], reps: int) -> list[float]:
    for _ in range(10):
        call()
    out = []
    for _ in range(reps):
        t0 = time.process_time()
        call()
        out.append(time.process_time() - t0)
    return out


async def _async_cpu_times(call: Callable[[], Awaitable[Any]], reps: int) -> list[float]:
    for _ in range(10):
        await call()
    out = []
    for _ in range(reps):
        t0 = time.process_time()
        await call()
        out.append(time.process_time() - t0)
    return out


async def _both_gets(client: Any) -> None:
    """What EngineSource does before parsing: two bounded GETs, each under one deadline."""
    from exporter.sources.engine import METRICS_PATH, SNAPSHOT_PATH
    from exporter.sources.http import Bounds, bounded_get

    async def get(path: str) -> None:
        await bounded_get(client, "http://engine.invalid" + path, Bounds(2.0, 8 * 1024 * 1024))

    await asyncio.gather(get(SNAPSHOT_PATH), get(METRICS_PATH))


async def _two_hand_offs() -> None:
    await asyncio.gather(asyncio.to_thread(int), asyncio.to_thread(int))


def _inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every `$ref` to `#/$defs/...` replaced by its definition (what-if)."""
    defs = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return inline({**defs[ref.removeprefix("#/$defs/")], **rest})
            return {k: inline(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [inline(x) for x in node]
        return node

    out: dict[str, Any] = inline(schema)
    return out


async def cycle_cost(cycles: int, warmup: int, state_dir: Path) -> dict[str, Any]:
    """CPU and wall time of `cycles` poll cycles of an in-process sidecar after `warmup` ones,
    and of the uncached render of /metrics after each (also bench/regression.py's figure)."""
    import structlog

    from tools.harness import StubEngine, make_sidecar

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings+
    metrics_text = SGLANG.read_text()
    snapshot = json.loads(SNAPSHOT.read_text())
    stub = StubEngine(snapshot, metrics=metrics_text)
    sidecar = make_sidecar(stub, state_dir)
    loop = sidecar.loop
    try:
        for _ in range(warmup):
            await loop.cycle()
        cpu, wall, render = [], [], []
        for _ in range(cycles):
            c0, w0 = time.process_time(), time.perf_counter()
            await loop.cycle()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
            r0 = time.process_time()
            body = sidecar.cache.render(False)
            render.append(time.process_time() - r0)
        sources = loop.view.sources
        ok = sources["engine_snapshot"].up and sources["engine_metrics"].up
        exported = sum(1 for ln in body.decode().splitlines() if ln and not ln.startswith("#"))
        requests = len(stub.requests)
    finally:
        sidecar.close()
        await sidecar.client.aclose()
    return {"cycles": cycles, "warmup": warmup, "sources_up": ok, "engine_requests": requests,
            "cpu": _ms(cpu), "wall": _ms(wall), "render_after_cycle_cpu": _ms(render),
            "exposition_bytes": len(body), "exposition_samples": exported}


async def sglang_cycle_cost(cycles: int, warmup: int, state_dir: Path) -> dict[str, Any]:
    """The same cycles with `--engine-kind sglang` against the exposition SGLang's own code
    renders for a hybrid model with a host tier (tests/fixtures/engines/): one /metrics parse
    for the mapping and the pass-through, and the health path."""
    from tools.harness import make_sidecar

    text = SGLANG_OWN.read_text()

    def engine(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=text if request.url.path == "/metrics" else "")

    sidecar = make_sidecar(engine, state_dir, engine_kind="sglang")
    try:
        for _ in range(warmup):
            await sidecar.loop.cycle()
        cpu = []
        for _ in range(cycles):
            c0 = time.process_time()
            await sidecar.loop.cycle()
            cpu.append(time.process_time() - c0)
        ok = sidecar.loop.view.sources["engine_snapshot"].up
    finally:
        sidecar.close()
        await sidecar.client.aclose()
    return {"cycles": cycles, "sources_up": ok, "exposition_bytes": len(text), "cpu": _ms(cpu)}


def _passthrough_poll(text: str) -> Callable[[], None]:
    """One poll's pass-through as the engine source and the loop do it: the parse with the
    label cache kept across polls, then the fold into the previous poll's totals."""
    from exporter.cycle.passthrough_totals import fold
    from exporter.sources import engine_metrics as passthrough

    cache = passthrough.SeriesCache()
    totals = [fold(None, passthrough.parse(text, cache=cache), "g-bench")]

    def poll() -> None:
        totals[0] = fold(totals[0], passthrough.parse(text, cache=cache), "g-bench")

    return poll


async def _cycles(cycles: int, warmup: int, state_dir: Path) -> dict[str, Any]:
    import jsonschema

    from exporter.snapshot.parse import parse_snapshot
    from exporter.snapshot.validate import schema, validator
    from exporter.sources.host import HostSource
    from tools.harness import StubEngine

    measured = await cycle_cost(cycles, warmup, state_dir)
    metrics_text = SGLANG.read_text()
    snapshot = json.loads(SNAPSHOT.read_text())
    body_json = SNAPSHOT.read_bytes()
    host = HostSource(None, None)
    shipped = validator()
    inlined = jsonschema.Draft202012Validator(_inline_defs(schema()))
    client = httpx.AsyncClient(transport=httpx.MockTransport(StubEngine(snapshot,
                                                                        metrics=metrics_text)))
    parts = {
        "snapshot: JSON decode": _cpu_times(lambda: json.loads(body_json), cycles),
        "snapshot: jsonschema validation (shipped validator)":
            _cpu_times(lambda: list(shipped.iter_errors(snapshot)), cycles),
        "snapshot: whole parse_snapshot (decode + validation + build)":
            _cpu_times(lambda: parse_snapshot(body_json), cycles),
        "pass-through parse + fold": _cpu_times(_passthrough_poll(metrics_text), cycles),
        "host source poll (psutil)": _cpu_times(host.poll, cycles),
        "both engine GETs through httpx + MockTransport, no parse":
            await _async_cpu_times(lambda: _both_gets(client), cycles),
        "two asyncio.to_thread hand-offs, empty":
            await _async_cpu_times(_two_hand_offs, cycles),
    }
    await client.aclose()
    whatif = {
        "jsonschema validation with the schema's $defs inlined (what-if, not shipped)":
            _ms(_cpu_times(lambda: list(inlined.iter_errors(snapshot)), cycles)),
    }
    in_cycle = ("snapshot: whole parse_snapshot (decode + validation + build)",
                "pass-through parse + fold",
                "host source poll (psutil)",
                "both engine GETs through httpx + MockTransport, no parse",
                "two asyncio.to_thread hand-offs, empty")
    return {**measured, "parts_cpu": {name: _ms(v) for name, v in parts.items()},
            "parts_in_cycle": list(in_cycle), "whatif_cpu": whatif}


def steady(seconds: float, workdir: Path) -> dict[str, Any]:
    procs = Procs(workdir)
    try:
        engine, engine_url = procs.simulator()
        sidecar, url = procs.sidecar(engine_url, "--poll-interval", "1")
        stop = threading.Event()
        scrapes = {"ok": 0, "failed": 0}
        rss: list[int] = []

        def scraper() -> None:
            with httpx.Client(timeout=5.0) as client:
                next_at = time.monotonic()
                while not stop.is_set():
                    try:
                        ok = client.get(url + "/metrics").status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    scrapes["ok" if ok else "failed"] += 1
                    rss.append(proc_sample(sidecar.pid).rss_bytes)
                    next_at += 1.0
                    stop.wait(max(0.0, next_at - time.monotonic()))

        thread = threading.Thread(target=scraper, daemon=True)
        thread.start()
        try:
            time.sleep(5.0)  # warm-up: imports done, connections open, a few cycles and renders
            rss.clear()
            a, ea = proc_sample(sidecar.pid), proc_sample(engine.pid)
            time.sleep(seconds)
            b, eb = proc_sample(sidecar.pid), proc_sample(engine.pid)
        finally:
            stop.set()
            thread.join(10)
        cycles = None
        for line in httpx.get(url + "/metrics", timeout=5).text.splitlines():
            if line.startswith("helios_exporter_poll_cycles_total "):
                cycles = float(line.split()[1])
        if not sidecar.alive():
            raise RuntimeError("sidecar died:\n" + sidecar.tail())
    finally:
        procs.stop_all()
    return {
        "seconds": b.at - a.at, "poll_interval_s": 1.0, "scrape_interval_s": 1.0,
        "scrapes": scrapes, "poll_cycles_total_at_end": cycles,
        "cpu_s": b.cpu_s - a.cpu_s, "cpu_share": cpu_share(a, b),
        "rss_start_mib": a.rss_bytes / MIB, "rss_end_mib": b.rss_bytes / MIB,
        "rss_max_mib": max([a.rss_bytes, b.rss_bytes, *rss]) / MIB,
        "threads": b.threads, "fds": b.fds,
        "engine_cpu_share": cpu_share(ea, eb), "loadavg_after": loadavg(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--steady-seconds", type=float, default=60.0,
                        help="steady-state measurement (0 skips it)")
    parser.add_argument("--json", type=Path, metavar="PATH")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    install_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-poll-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        (work / "state").mkdir(exist_ok=True)
        (work / "sglang").mkdir(exist_ok=True)
        cycle = asyncio.run(_cycles(args.cycles, args.warmup, work / "state"))
        print(f"poll cycle cpu: median {cycle['cpu']['median_ms']:.3f} ms, p99 "
              f"{cycle['cpu']['p99_ms']:.3f} ms", file=sys.stderr)
        mapped = asyncio.run(sglang_cycle_cost(args.cycles, args.warmup, work / "sglang"))
        print(f"poll cycle cpu, --engine-kind sglang: median {mapped['cpu']['median_ms']:.3f} "
              f"ms, p99 {mapped['cpu']['p99_ms']:.3f} ms", file=sys.stderr)
        result: dict[str, Any] = {"benchmark": "poll_cost", "cycle": cycle,
                                  "cycle_sglang": mapped, "loadavg_after_cycles": loadavg()}
        if args.steady_seconds > 0:
            result["steady"] = steady(args.steady_seconds, work / "steady")
            s = result["steady"]
            print(f"steady: cpu {s['cpu_share']:.2%} of a core, rss {s['rss_end_mib']:.1f} MiB",
                  file=sys.stderr)
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
