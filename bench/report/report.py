"""Render docs/benchmarks.md from one results.json of bench/suite.py.

    .venv/bin/python bench/report/report.py /tmp/helios-bench-XXXX/results.json > docs/benchmarks.md

Every figure is printed beside its goal and whether it is met; where a goal is missed, the text
beside it gives what the same run measured about the cause (CPU shares, the parts of a cycle).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: `bench` importable
from bench.report import scale as report_scale
from bench.report.format import GOALS, client_count, command_line, ms, not_measured, pct, yes
from bench.report.paths import alert_latency, nvml_poll, observer_cost
from bench.report.sidecar import ingest, poll_cost, scrape_cost, scrape_load, soak

RENDER: dict[str, tuple[str, Any]] = {  # section -> (title, renderer)
    "scrape_load": ("1. /metrics throughput and latency: sidecar vs node-exporter", scrape_load),
    "ingest": ("2. Engine ingest: pass-through parse vs full parse", ingest),
    "poll_cost": ("3. Poll cycle cost and steady state", poll_cost),
    "soak": ("4. Soak against a flapping engine", soak),
    "alert_latency": ("5. Breach-to-webhook alert latency", alert_latency),
    "nvml_poll": ("6. NVML poll cost per GPU", nvml_poll),
    "observer_cost": ("7. Observer cost: the sidecar's polling on and off", observer_cost),
    "scrape_cost": ("8. What a scrape costs: identity, gzip, TLS with basic auth", scrape_cost),
    "scale": (report_scale.TITLE, report_scale.render),
}


def analysis(results: dict[str, Any], goals: list[tuple[str, str, str, bool | None]]) -> list[str]:
    """What the run itself says about each missed goal, and the machine's other load."""
    sections = results["sections"]
    out: list[str] = []

    def data(name: str) -> dict[str, Any] | None:
        rec = sections.get(name)
        return rec["data"] if rec and rec.get("status") == "ok" else None

    busy = results.get("machine_busy_share")
    nproc = results["machine"]["nproc"]
    if busy is not None:
        out.append(
            f"- **Machine load.** Over the run all {nproc} CPUs together were {pct(busy)} busy, "
            "the benchmark's own processes and whatever else ran on the machine (the *other "
            "load* column of section 1 separates the two during the load tests). Nothing is "
            "pinned: when another process shares a core, wall-clock latencies get a tail and "
            "CPU timings (process_time counts cache misses and lost turbo too) grow, so the "
            "figures above are upper bounds for this machine; the min columns show the cost "
            "on an undisturbed core.")
    ing = data("ingest")
    if ing:
        for r in ing["results"]:
            if r["ratio"] >= GOALS["ingest_ratio"]:
                continue
            share = r["allow_listed_samples"] / r["sample_lines"]
            per_fast = r["passthrough"]["median_ms"] * 1000 / max(1, r["allow_listed_samples"])
            per_full = r["full_parse"]["median_ms"] * 1000 / max(1, r["sample_lines"])
            out.append(
                f"- **Ingest, {r['input']}: {r['ratio']:.1f}x, goal {GOALS['ingest_ratio']:g}x.** "
                f"{share:.0%} of this input's samples are allow-listed, so the pass-through "
                "cannot win by skipping lines: it parses nearly all of them, at "
                f"{per_fast:.1f} µs per allow-listed sample against the full parser's "
                f"{per_full:.1f} µs per sample (its label regex, `floatToGoString` for every "
                "`le`, then sorting and validating each histogram after the merge). Proposed "
                "change (exporter/sources/engine_metrics.py, not made here): keep a bounded cache from a "
                "line's series text (name and label block, as received) to its parsed result "
                "(family, suffix, kept labels, dropped-label count). An engine sends the same "
                "series every poll, so from the second poll on an allow-listed line costs a "
                "dictionary lookup and a float() instead of a label parse; the output is "
                "unchanged. Unbounded labels (request ids) only churn the cache, which is "
                "cleared when full.")
    poll = data("poll_cost")
    if poll and poll["cycle"]["cpu"]["median_ms"] >= GOALS["cycle_cpu_ms"]:
        c = poll["cycle"]
        parts = c["parts_cpu"]
        val = parts.get("snapshot: jsonschema validation (shipped validator)")
        what = next(iter(c.get("whatif_cpu", {}).values()), None)
        hand = parts.get("two asyncio.to_thread hand-offs, empty")
        text = (f"- **Poll cycle CPU: median {ms(c['cpu']['median_ms'])}, goal "
                f"{GOALS['cycle_cpu_ms']:g} ms** (min {ms(c['cpu']['min_ms'])}).")
        if val:
            text += (f" JSON Schema validation of the snapshot alone costs "
                     f"{ms(val['median_ms'])}")
            if what:
                text += (f"; the same jsonschema validator on the same schema with its `$defs` "
                         f"inlined costs {ms(what['median_ms'])} (what-if row in section 3): "
                         "`referencing` resolves every `$ref` on every call. Proposed change "
                         "(exporter/snapshot/parse.py, not made here): inline the `$defs` when the "
                         "validator is built (same library, same error messages and paths)")
            text += "."
        if hand:
            text += (f" The two `asyncio.to_thread` hand-offs cost {ms(hand['median_ms'])}; "
                     "parsing bodies under a few KiB on the event loop and only large ones in a "
                     "thread would save that without giving up the protection against hostile "
                     "bodies.")
        text += (" The cached pass-through parse proposed above also shortens the cycle, since "
                 "the SGLang text is parsed every cycle.")
        out.append(text)
    scrape = data("scrape_load")
    if scrape:
        by = {(p["target"], p["clients"]): p for p in scrape["points"]}
        for clients in scrape["clients"]:
            sc, ne = by.get(("sidecar", clients)), by.get(("node-exporter", clients))
            if sc is None or ne is None:
                continue
            ours = sc["wrk_cpu_share"] + sc["cpu_share"]["server"] + sc["cpu_share"]["engine"]
            other = max(0.0, (sc["machine_busy_share"] or 0.0) * nproc - ours)
            if sc["p99_ms"] >= ne["p50_ms"]:
                out.append(
                    f"- **/metrics p99 at {client_count(clients)}: {ms(sc['p99_ms'])} against "
                    f"node-exporter's p50 {ms(ne['p50_ms'])}.** The sidecar's p50 was "
                    f"{ms(sc['p50_ms'])} and p90 {ms(sc['p90_ms'])}, max {ms(sc['max_ms'])}: a "
                    "tail of stalls, not a slow path. During the point the sidecar got "
                    f"{pct(sc['cpu_share']['server'])} of a core while other processes on the "
                    f"machine used {other:.2f} cores; a Python event loop that is not scheduled "
                    "for tens of milliseconds holds every open request that long. Re-run on a "
                    "quiet machine before reading this as a regression.")
            if ne["rps"] and sc["rps"] / ne["rps"] < GOALS["throughput"]:
                out.append(
                    f"- **/metrics throughput at {client_count(clients)}: {sc['rps'] / ne['rps']:.1f}x."
                    f"** The sidecar used {pct(sc['cpu_share']['server'])} of a core and wrk "
                    f"{pct(sc['wrk_cpu_share'])}. It serves cached bytes through uvicorn's "
                    "pure-Python h11 parser (httptools and uvloop are not installed); "
                    "`uvicorn[standard]` would use httptools and uvloop.")
    soak_d = data("soak")
    if soak_d and not soak_d["reached"]:
        out.append(f"- **Soak cycles.** {soak_d['cycles_measured']:,.0f} of "
                   f"{soak_d['cycles_target']:,} cycles in the time bound ("
                   f"{soak_d['cycles_per_s']:.0f}/s); the memory and fd figures hold for the "
                   "cycles run.")
    return out


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    pk = m["packages"]
    kind = "smoke (`--quick`)" if results.get("quick") else "full"
    # A section re-measured on its own and spliced into the results carries its own stamp.
    apart = [title.split(".", 1)[0] for name, (title, _) in RENDER.items()
             if ((results["sections"].get(name) or {}).get("data") or {}).get("measured", {})
             .get("git_commit", m["git_commit"]) != m["git_commit"]]
    head = [
        "# Benchmarks", "",
        f"Measured {m['date']} by `{results['command']}` ({kind} run, "
        f"{results['wall_s'] / 60:.1f} min, one run for every figure below"
        + (f" except section {', '.join(apart)}, measured on its own (its date and commit are "
           "in it)" if apart else "")
        + f") at commit `{m['git_commit']}`"
        + (" with uncommitted changes under exporter/ or simulator/"
           if m["exporter_tree_dirty"] else "") + ". Everything ran on 127.0.0.1 and every process "
        "was stopped at the end. Regenerate with `bench/run` (`bench/run --quick` for a smoke "
        "run, which writes to its work directory unless `--out` is given); the raw figures of the "
        "committed run are in `bench/results/latest.json` (`bench/report/report.py` re-renders them).",
        "",
        "| machine | |", "| --- | --- |",
        f"| CPU | {m['nproc']} x {m['cpu_model']}"
        + (f" at {m['cpu_mhz']:.0f} MHz" if m.get("cpu_mhz") else "")
        + (", virtual machine" if m["virtualized"] else "") + " (`nproc` "
        f"{m['nproc']}) |",
        f"| memory | {m['memory_gib']} GiB |",
        f"| OS | {m['os']}, kernel {m['kernel']} |",
        f"| Python | {m['python']}: helios-exporter {pk['helios-exporter']}, uvicorn "
        f"{pk['uvicorn']} (h11 {pk['h11']}, httptools {pk['httptools']}, uvloop {pk['uvloop']}), "
        f"fastapi {pk['fastapi']}, starlette {pk['starlette']}, httpx {pk['httpx']}, "
        f"prometheus-client {pk['prometheus-client']}, jsonschema {pk['jsonschema']}, psutil "
        f"{pk['psutil']}, nvidia-ml-py {pk['nvidia-ml-py']} |",
        f"| tools | {m['wrk']}; {m['node_exporter']}; {m['prometheus']}; {m['alertmanager']} |",
        f"| load | load average {' / '.join(f'{x:.2f}' for x in m['loadavg_at_start'])} at the "
        f"start, {' / '.join(f'{x:.2f}' for x in results['loadavg_at_end'])} at the end; the "
        f"whole machine was {pct(results.get('machine_busy_share'))} busy over the run "
        "(this benchmark and anything else running) |", "",
    ]
    goals: list[tuple[str, str, str, bool | None]] = []
    body: list[str] = []
    sections = dict(results["sections"])
    if "scale" not in sections:  # not run by this invocation: the stored result, if any
        stored = report_scale.stored_record()
        if stored is not None:
            sections["scale"] = stored
    for name, (title, fn) in RENDER.items():
        body += [f"## {title}", ""]
        rec = sections.get(name)
        body += command_line(rec)
        if rec is None or rec.get("status") != "ok":
            body += not_measured(name, rec)
            goals.append((title.split(". ", 1)[1], "-", "not measured", None))
            continue
        if name == "scrape_load":
            body += fn(rec, goals, m["nproc"])
        else:
            body += fn(rec, goals)
    table = ["## Goals", "", "| figure | goal | measured | |", "| --- | --- | --- | --- |"]
    table += [f"| {name} | {goal} | {value} | {yes(ok)} |" for name, goal, value, ok in goals]
    missed = [g for g in goals if g[3] is False]
    table += ["", (f"{len(missed)} of {len(goals)} missed; see *Analysis* at the end for what this "
                   "run measured about each." if missed else "Every goal measured is met."), ""]
    unmeasured = [g for g in goals if g[3] is None and g[1] != "none"]
    if unmeasured:
        table[-1:-1] = [f"{len(unmeasured)} not measured (see its section)."]
    scale = sections.get("scale")
    scale_notes = report_scale.analysis(scale["data"]) if scale and scale.get("status") == "ok" \
        else []
    tail = ["## Analysis", "", *analysis(results, goals), *scale_notes, "",
            "## How it is measured", "", METHOD.strip(), ""]
    return "\n".join(head + table + body + tail)


METHOD = """
- `bench/run` (bash) installs wrk, node-exporter, Prometheus, Alertmanager and a C compiler with
  apt when missing (as root, or via sudo), runs `scripts/bootstrap` when `.venv` is missing, then
  `bench/suite.py`, which runs each section below as its own process group under a time bound
  and writes this page. Sections: `bench/scrape_load.py`, `bench/ingest.py`,
  `bench/poll_cost.py`, `bench/soak.py`, `bench/alert_latency.py`, `bench/nvml_poll.py`,
  `bench/observer_cost.py`, `bench/scrape_cost.py`, and with `--scale` `bench/scale/scale.py` (an hour or
  more; otherwise the page shows its stored result); each also runs alone (`--help`).
- Nothing is pinned to a CPU: on 2 cores the sidecar, the simulated engine, the load generator and
  whatever else runs on the machine share them, and the tables say how busy the machine was.
- wrk is a closed-loop generator (each connection waits for its answer), so latency percentiles
  are per answered request, not corrected for coordinated omission; both servers are measured the
  same way, one after the other, for the same duration.
- CPU and memory of a process come from /proc/<pid>/stat (utime+stime in 10 ms ticks, RSS in
  pages) and /proc/<pid>/fd; in-process timings from `time.process_time()` (CPU of every thread of
  the process) or `time.perf_counter()` (wall).
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, metavar="RESULTS.json",
                        help="results.json written by bench/run (bench/suite.py)")
    args = parser.parse_args()
    try:
        results = json.loads(args.results.read_text())
    except (OSError, ValueError) as exc:
        parser.error(f"cannot read {args.results}: {exc}")
    sys.stdout.write(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
