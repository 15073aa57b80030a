"""What the shipped rules and dashboards cost a Prometheus that watches 100 and 1,000 engines.

    .venv/bin/python bench/scale/scale.py --engines 100 1000 --json /tmp/scale.json
    bench/run --scale            # the same as a section of the suite; writes docs/benchmarks.md

For each fleet size: backfill the fleet's history with promtool (bench/scale/tsdb.py, from the
model in bench/scale/series.py: the real full exposition per engine, counters growing, restore
windows open, closed in time, closed late and breached, generation changes, a lost GPU), start
the Debian `prometheus` on it with the rule files alerts/helios-*.yaml and a live feed of the same
model (one scrape target per 100 engines, honor_labels, 15 s like deploy/), then measure:

- series per engine (live, `count by (cluster, instance) ({job="helios-exporter"})`);
- each rule group's evaluation time, from /api/v1/rules `evaluationTime` over several
  evaluations (median, max) and its slowest rule;
- every dashboard query (dashboards/*.json: panels, annotations, variables), with the variables
  substituted as Grafana substitutes them (bench/scale/queries.py), over the last 6 h, as
  wall-clock time to the whole answer from this process; repeated, median and max.

Goals: every rule group under 200 ms and every panel query under 1 s at 1,000 engines.
Too slow for CI; the series model has a unit test (tests/bench/test_scale.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from exporter import durations

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: `bench` importable
from alerts.promql import STEP
from bench.benchlib import (
    PYTHON,
    ROOT,
    Procs,
    cpu_share,
    free_port,
    host_cpu_busy,
    install_sigterm,
    loadavg,
    machine,
    proc_sample,
    wait_until,
    with_folders_named,
)
from bench.scale import series as scale_series
from bench.scale import steps as scale_steps
from bench.scale.measure import RANGE_S, Prom, measure_queries, measure_rules, wait_compacted
from bench.scale.tsdb import Store

RULE_GOAL_MS = 200.0
QUERY_GOAL_MS = 1000.0
GROUP_SIZE = 100
LONG_WINDOW_S = 600  # families read through longer range selectors get extra history


def long_windows(exprs: Sequence[str]) -> dict[str, float]:
    """Metric -> longest range selector (seconds) over it in `exprs`, for ranges > 10 min."""
    out: dict[str, float] = {}
    for expr in exprs:
        for name, window in re.findall(r"([a-zA-Z_:][\w:]*)\s*(?:\{[^}]*\})?\s*\[(\d+[smhdw])", expr):
            seconds = durations.seconds(window)
            if seconds > LONG_WINDOW_S and not name.startswith("helios:"):
                out[name] = max(out.get(name, 0.0), seconds)
    return out


def rule_files(pattern: str) -> list[Path]:
    files = sorted(ROOT.glob(pattern))
    if not files:
        raise SystemExit(f"no rule files match {pattern}")
    return files


def expressions(rules: Sequence[Path], dashboards: Sequence[Path]) -> list[str]:
    out: list[str] = []
    for path in rules:
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += [r["expr"] for r in group["rules"]]
    for path in dashboards:
        text = path.read_text()
        out += [json.loads(f'"{m}"') for m in re.findall(r'"expr":\s*"((?:[^"\\]|\\.)*)"', text)]
    return out


def history(rules: Sequence[Path], dashboards: Sequence[Path]) -> tuple[list[str], float]:
    """Families that need history before the measured range, and how much (hours): those read
    through long range selectors, and the sources of the steps (backfilled over their reach)."""
    windows = long_windows(expressions(rules, dashboards))
    steps = scale_steps.find(rules)
    for rule in steps.rules:
        for name in re.findall(r"([a-zA-Z_][\w]*)\{", rule["expr"]):
            windows[name] = max(windows.get(name, 0.0), steps.reach_s)
    names = {t.name: t.family for t in scale_series.templates()}
    families = sorted({names.get(m, m) for m in windows})
    return families, max(windows.values(), default=0.0) / 3600


# -- one Prometheus -----------------------------------------------------------------------------
def prometheus_config(path: Path, feed_port: int, groups: int, rules: Path) -> None:
    config = {
        "global": {"scrape_interval": f"{scale_series.SCRAPE_INTERVAL}s",
                   "evaluation_interval": f"{scale_series.SCRAPE_INTERVAL}s",
                   "scrape_timeout": "10s"},
        "rule_files": [str(rules / "*.yaml")],
        "scrape_configs": [{
            "job_name": "scale-feed", "honor_labels": True,
            "static_configs": [{"targets": [f"127.0.0.1:{feed_port}"],
                                "labels": {"__metrics_path__": f"/metrics/{g}"}}
                               for g in range(groups)],
        }],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def backfill_steps(rules_dir: Path, prom: Prom, tsdb: Path, work: Path, end: float,
                   log: Callable[[str], None]) -> dict[str, Any]:
    """The steps' history up to `end` (bench/scale/steps.py), as blocks in `tsdb`."""
    steps = scale_steps.find(sorted(rules_dir.glob("*.yaml")))
    if not steps.rules:
        return {"rules": 0, "blocks": 0}
    shutil.rmtree(work, ignore_errors=True)
    (work / "blocks").mkdir(parents=True)
    scale_steps.rules_file(steps, str(STEP), work / "steps.yaml")
    end -= end % STEP.seconds
    start = end - steps.reach_s - STEP.seconds
    t0 = time.monotonic()
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "rules", "-q",
                    f"--start={int(start)}", f"--end={int(end)}", f"--url={prom.url}",
                    f"--output-dir={work / 'blocks'}", str(work / "steps.yaml")],
                   check=True, capture_output=True)
    blocks = [b for b in (work / "blocks").iterdir() if (b / "meta.json").exists()]
    for block in blocks:
        shutil.move(str(block), tsdb / block.name)
    seconds = time.monotonic() - t0
    log(f"  steps: {len(steps.rules)} step rules backfilled over {steps.reach_s / 3600:.2f} h "
        f"into {len(blocks)} block(s) in {seconds:.0f} s")
    return {"rules": len(steps.rules), "blocks": len(blocks), "reach_s": steps.reach_s,
            "start": start, "end": end, "seconds": seconds}


def run_size(engines: int, store: Store, work: Path, rules: Sequence[Path],
             dashboards: Sequence[Path], args: argparse.Namespace,
             log: Callable[[str], None]) -> dict[str, Any]:
    groups = list(range(max(1, engines // store.meta["group_size"])))
    build: list[dict[str, float]] = []
    for _ in range(6):  # catch up with the clock: each pass backfills while time moves on
        now = time.time()
        done = store.extend(groups, now - now % scale_series.SCRAPE_INTERVAL, work / "om", log)
        build.append(done)
        log(f"  backfilled {done['samples']:,} samples in {done['seconds']:.0f} s")
        if done["seconds"] < 60:
            break
    covered = min(store.covered(g) or 0 for g in groups)
    tsdb = work / f"tsdb-{engines}"
    blocks = store.assemble(groups, tsdb)
    rules_dir = work / "rules"
    shutil.rmtree(rules_dir, ignore_errors=True)
    rules_dir.mkdir()
    for path in rules:
        shutil.copy(path, rules_dir / path.name)
    subprocess.run(["promtool", "check", "rules", *map(str, rules_dir.glob("*.yaml"))],
                   check=True, capture_output=True)
    procs = Procs(work / f"procs-{engines}")
    try:
        feed_port, port = free_port(), free_port()
        feed = procs.start("feed", [PYTHON, str(ROOT / "bench" / "scale" / "series.py"), "serve",
                                    "--engines", str(engines), "--anchor", repr(store.anchor),
                                    "--seed", str(store.meta["seed"]), "--groups",
                                    str(len(groups)), "--port", str(feed_port)])
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{feed_port}/metrics/0", timeout=30)
                   .status_code == 200, 120, "the feed", feed)
        prometheus_config(work / "prometheus.yml", feed_port, len(groups), rules_dir)
        prom = Prom(f"http://127.0.0.1:{port}")

        def start_prometheus() -> Any:
            proc = procs.start("prometheus", [
                "prometheus", f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={tsdb}", f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=30d", "--log.level=warn"])
            wait_until(lambda: httpx.get(prom.url + "/-/ready", timeout=5).status_code == 200,
                       600, "prometheus ready", proc, interval=2)
            return proc

        started = time.time()
        prom_proc = start_prometheus()
        log(f"  prometheus up {time.time() - started:.0f} s after start; {blocks} blocks")
        compaction = wait_compacted(prom, log)
        steps = backfill_steps(rules_dir, prom, tsdb, work / "steps", started, log)
        if steps["blocks"]:  # a restart loads them (and replays what was scraped so far)
            prom_proc.stop(timeout=120)
            prom_proc = start_prometheus()
            wait_compacted(prom, log)
        time.sleep(4 * scale_series.SCRAPE_INTERVAL)  # several scrapes and evaluations
        if args.live_minutes:  # the recent past in the head block, as in a running Prometheus
            log(f"  scraping live for {args.live_minutes:g} min before measuring ...")
            time.sleep(args.live_minutes * 60)
        raw = prom.per_engine('__name__!~"helios:.*|ALERTS.*"')
        recorded = prom.per_engine('__name__=~"helios:.*"')
        load0, (busy0, total0) = loadavg(), host_cpu_busy()
        log("  rule groups ...")
        cpu0 = proc_sample(prom_proc.pid)
        rule_results = measure_rules(prom, args.evaluations, scale_series.SCRAPE_INTERVAL)
        prom_cpu = cpu_share(cpu0, proc_sample(prom_proc.pid))
        end = time.time()
        query_results: list[dict[str, Any]] = []
        if dashboards:
            log("  dashboard queries ...")
            query_results = measure_queries(prom, dashboards, args.reps, end)
        busy1, total1 = host_cpu_busy()
        machine_load = {"loadavg_before": load0, "loadavg_after": loadavg(),
                        "prometheus_cpu_share_during_rules": prom_cpu,
                        "prometheus_nice": os.getpriority(os.PRIO_PROCESS, prom_proc.pid),
                        "busy_share": (busy1 - busy0) / (total1 - total0) if total1 > total0
                        else None}
        return {
            "engines": engines, "groups": len(groups), "build": build,
            "backfill_end": covered, "prometheus_start": started,
            "gap_s": started - covered, "blocks_assembled": blocks, "compaction": compaction,
            "steps_backfilled": steps,
            "series_per_engine": _spread(raw), "recorded_series_per_engine": _spread(recorded),
            "head_series": prom.own("prometheus_tsdb_head_series"),
            "prometheus_rss_bytes": proc_sample(prom_proc.pid).rss_bytes,
            "rules": rule_results, "queries": query_results, "query_end": end,
            "machine_during_measurement": machine_load,
        }
    finally:
        procs.stop_all()
        if not args.keep_tsdb:
            shutil.rmtree(tsdb, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--rules", default="alerts/helios-*.yaml",
                        help="rule files (glob relative to the repository root)")
    parser.add_argument("--dashboards", default="dashboards/*.json",
                        help="dashboards whose queries are timed (glob; '' for the rules alone)")
    parser.add_argument("--reps", type=int, default=5, help="runs of every dashboard query")
    parser.add_argument("--evaluations", type=int, default=8, help="evaluations per rule group")
    parser.add_argument("--hours", type=float, default=6.0, help="history backfilled")
    parser.add_argument("--live-minutes", type=float, default=0.0,
                        help="scrape the fleet live this long before measuring, so that the "
                        "rules' recent windows lie in the head block rather than in backfilled "
                        "blocks (as in a Prometheus that has run for hours)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/helios-scale"))
    parser.add_argument("--store", type=Path, help="block store (default <workdir>/store); "
                        "reused across runs")
    parser.add_argument("--keep-tsdb", action="store_true")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--note", help="a remark kept with the result and shown with its "
                        "figures (how this run differs from the commit it names)")
    args = parser.parse_args()
    install_sigterm()
    rules = rule_files(args.rules)
    dashboards = sorted(ROOT.glob(args.dashboards)) if args.dashboards else []
    families, history_hours = history(rules, dashboards)
    size = min(GROUP_SIZE, *args.engines)
    store = Store(args.store or args.workdir / "store", size, args.hours, history_hours, families)

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    result: dict[str, Any] = {
        "benchmark": "scale", "machine": machine(), "command": shlex.join(sys.argv),
        "prometheus": _version("prometheus"), "promtool": _version("promtool"),
        "rule_files": [str(p.relative_to(ROOT)) for p in rules],
        "dashboards": [p.name for p in dashboards],
        "model": {"scrape_interval_s": scale_series.SCRAPE_INTERVAL, "hours": args.hours,
                  "history_hours": history_hours, "history_families": families,
                  "group_size": size, "anchor": store.anchor,
                  "scenarios": sorted(set(scale_series.SCENARIOS)),
                  "scenario_period": len(scale_series.SCENARIOS),
                  "host_tiers": sorted(set(scale_series.HOST_TIERS)),
                  "host_tier_period": len(scale_series.HOST_TIERS),
                  "golden": str(scale_series.GOLDEN.relative_to(ROOT))},
        "note": args.note, "live_minutes": args.live_minutes,
        "range_s": RANGE_S, "goals": {"rule_group_ms": RULE_GOAL_MS, "query_ms": QUERY_GOAL_MS},
        "runs": [],
    }
    # Recorded with the folders' names, not this machine's temporary paths.
    folders = {**({args.json: args.json.name} if args.json else {}), args.workdir: "WORKDIR",
               **({args.store: "STORE"} if args.store else {})}
    for engines in sorted(args.engines):
        log(f"== {engines} engines")
        result["runs"].append(run_size(engines, store, args.workdir, rules, dashboards, args,
                                       log))
        if args.json:  # after each fleet size: a later one that fails keeps the earlier
            args.json.write_text(json.dumps(with_folders_named(result, folders), indent=2,
                                            default=str) + "\n")
    if not args.json:
        sys.stdout.write(json.dumps(with_folders_named(result, folders), indent=2, default=str)
                         + "\n")
    return 0


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    return {"engines_seen": len(values),
            "median": statistics.median(values) if values else None,
            "min": min(values, default=None), "max": max(values, default=None)}


def _version(binary: str) -> str:
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).splitlines()[0] if (done.stdout or done.stderr) else "?"


if __name__ == "__main__":
    sys.exit(main())
