"""Render docs/benchmarks.md from one results.json of bench/suite.py.

    .venv/bin/python bench/report.py /tmp/helios-bench-XXXX/results.json > docs/benchmarks.md

Every figure is printed beside its goal and whether it is met; where a goal is missed, the text
beside it gives what the same run measured about the cause (CPU shares, the parts of a cycle).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report_scale

GOALS = {
    "throughput": 10.0,  # sidecar req/s >= 10 x node-exporter's, per client count
    "keepalive_p50_ms": 5.0,  # median /metrics answer on one keep-alive connection (Prometheus)
    "ingest_ratio": 5.0,  # full parse / pass-through parse
    "cycle_cpu_ms": 5.0,
    "steady_cpu_share": 0.02,
    "steady_rss_mib": 80.0,
    "soak_rss_growth_mib": 10.0,
    # A gzip scrape's CPU over an identity scrape's, at most this share of compressing the body
    # once: the compression is paid once per poll cycle, not per scrape.
    "gzip_excess_share": 0.5,
}
NVML_DOC_RANGE_MS = (0.2, 0.4)  # docs/gpu.md: "roughly 0.2-0.4 ms per GPU" against the fake


def yes(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "n/a"}[ok]


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms" if value >= 0.1 else f"{value * 1000:.0f} µs"


def pct(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value * 100:.{digits}f}%"


def _clients(n: int) -> str:
    return "1 client" if n == 1 else f"{n} clients"


def not_measured(name: str, record: dict[str, Any] | None) -> list[str]:
    if record is None:
        return ["Not measured: the section was not run by this invocation (`--only`, or the run "
                "was interrupted before it).", ""]
    lines = [f"**Not measured**: {record.get('status')}: {record.get('reason', '?')}.", ""]
    tail = record.get("log_tail")
    if tail:
        lines += ["Last lines of its output:", "", "```", tail.strip()[-1200:], "```", ""]
    return lines


def command_line(record: dict[str, Any] | None) -> list[str]:
    if record is None:
        return []
    bits = [f"Command: `{record['command']}`"]
    if "wall_s" in record:
        bits.append(f"{record['wall_s']:.0f} s")
    if record.get("machine_busy_share") is not None:
        bits.append(f"whole machine {pct(record['machine_busy_share'])} busy meanwhile")
    return ["; ".join(bits) + ".", ""]


# -- sections -------------------------------------------------------------------------------------
def scrape_load(rec: dict[str, Any], goals: list[tuple[str, str, str, bool | None]],
                nproc: int) -> list[str]:
    d = rec["data"]
    lines = [
        f"Load generator: {d['load_generator']}, {d['duration_s']:g} s per point after "
        f"{d['warmup_s']:g} s of warm-up per target, `--timeout 10s`; targets alternate order "
        "per client count. Sidecar: "
        f"`{d['sidecar_args']}`, body {d['body_bytes']['sidecar']:,} bytes "
        f"({d['sample_lines']['sidecar']} samples). node-exporter: `{d['node_exporter_args']}`, "
        f"body {d['body_bytes']['node-exporter']:,} bytes "
        f"({d['sample_lines']['node-exporter']} samples).", "",
        "| target | clients | req/s | p50 | p90 | p99 | max | errors | wrk CPU | server CPU "
        "| engine CPU | machine busy | other load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by: dict[tuple[str, int], dict[str, Any]] = {}
    for p in d["points"]:
        by[(p["target"], p["clients"])] = p
        ours = p["wrk_cpu_share"] + p["cpu_share"]["server"] + p["cpu_share"]["engine"]
        other = (p["machine_busy_share"] * nproc - ours) if p["machine_busy_share"] else None
        p["other_cores"] = max(0.0, other) if other is not None else None
        lines.append(
            f"| {p['target']} | {p['clients']} | {p['rps']:,.0f} | {ms(p['p50_ms'])} "
            f"| {ms(p['p90_ms'])} | {ms(p['p99_ms'])} | {ms(p['max_ms'])} | {p['errors_total']} "
            f"| {pct(p['wrk_cpu_share'])} | {pct(p['cpu_share']['server'])} "
            f"| {pct(p['cpu_share']['engine'])} | {pct(p['machine_busy_share'])} "
            f"| {'-' if other is None else f'{max(0.0, other):.2f} cores'} |")
    lines += ["", "CPU columns are shares of one core over the point (wrk from its own rusage, the "
              "servers from /proc/<pid>/stat); *machine busy* is all CPUs together from /proc/stat;"
              " *other load* is what processes outside this benchmark used (machine busy x "
              f"{nproc} cores minus wrk, server and engine).", ""]
    notes = []
    for clients in d["clients"]:
        sc, ne = by.get(("sidecar", clients)), by.get(("node-exporter", clients))
        if sc is None or ne is None:
            continue
        ratio = sc["rps"] / ne["rps"] if ne["rps"] else float("inf")
        if clients == 1:
            goals.append(("/metrics median, 1 keep-alive connection",
                          f"< {GOALS['keepalive_p50_ms']:g} ms", f"p50 {ms(sc['p50_ms'])}",
                          sc["p50_ms"] < GOALS["keepalive_p50_ms"]))
        goals.append((f"/metrics throughput, {_clients(clients)}",
                      f">= {GOALS['throughput']:g}x node-exporter",
                      f"{sc['rps']:,.0f} vs {ne['rps']:,.0f} req/s = {ratio:.1f}x",
                      ratio >= GOALS["throughput"]))
        goals.append((f"/metrics sidecar p99 vs node-exporter p50, {_clients(clients)}",
                      "sidecar p99 < node-exporter p50",
                      f"{ms(sc['p99_ms'])} vs {ms(ne['p50_ms'])}", sc["p99_ms"] < ne["p50_ms"]))
        server = sc["cpu_share"]["server"]
        if sc["wrk_cpu_share"] < 0.5 and server < 0.9:
            notes.append(
                f"At {_clients(clients)} the sidecar process used {pct(server)} of a core and wrk "
                f"{pct(sc['wrk_cpu_share'])}; the machine was {pct(sc['machine_busy_share'])} busy"
                f" with {sc['other_cores']:.2f} cores taken by other processes, so the sidecar "
                "(one event loop, one core at most) was short of CPU rather than of work: its "
                "figures are a lower bound for this machine.")
        elif sc["wrk_cpu_share"] < server:
            notes.append(f"At {_clients(clients)} wrk used {pct(sc['wrk_cpu_share'])} of a core "
                         f"against the sidecar's {pct(server)}: the server, not the load "
                         "generator, is the bottleneck.")
        else:
            notes.append(f"At {_clients(clients)} wrk used {pct(sc['wrk_cpu_share'])} of a core, "
                         f"more than the sidecar's {pct(server)}: the load generator may limit "
                         "these figures.")
    sc_err = sum(p["errors_total"] for p in d["points"] if p["target"] == "sidecar")
    ne_err = sum(p["errors_total"] for p in d["points"] if p["target"] == "node-exporter")
    goals.append(("/metrics errors (sidecar)", "0", f"{sc_err} (node-exporter: {ne_err})",
                  sc_err == 0))
    return [*lines, *[f"- {n}" for n in notes], ""]


def ingest(rec: dict[str, Any], goals: list[tuple[str, str, str, bool | None]]) -> list[str]:
    d = rec["data"]
    lines = [
        f"Timer: {d['timer']} (one full parse, then pass-through parses for about as long, so "
        f"both see the same machine load), {d['seconds_per_input']:g} s per input, median per "
        "parse. Full parse: `list(prometheus_client.parser."
        "text_string_to_metric_families(text))`; pass-through: "
        "`exporter.passthrough.parse(text, cache=cache)` then `passthrough_totals.fold` into "
        "the previous poll's totals, as the sidecar does every poll, with its label-parse cache "
        "and totals warmed by one earlier call (the first poll; engines repeat their series, "
        "only values change).", "",
        "| input | bytes | samples (families) | allow-listed samples | exported samples "
        "| pass-through median (p99, reps) | full parse median (p99, reps) | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in d["results"]:
        f, p = r["full_parse"], r["passthrough"]
        lines.append(
            f"| {r['input']} | {r['bytes']:,} | {r['sample_lines']:,} ({r['families']}) "
            f"| {r['allow_listed_samples']} | {r['exported_samples']} "
            f"| {ms(p['median_ms'])} ({ms(p['p99_ms'])}, {p['reps']}) "
            f"| {ms(f['median_ms'])} ({ms(f['p99_ms'])}, {f['reps']}) | **{r['ratio']:.1f}x** |")
        goals.append((f"ingest vs full parse, {r['input']}", f">= {GOALS['ingest_ratio']:g}x "
                      "faster", f"{r['ratio']:.1f}x ({ms(p['median_ms'])} vs "
                      f"{ms(f['median_ms'])})", r["ratio"] >= GOALS["ingest_ratio"]))
    lines += ["", "The pass-through parser looks at every line but parses only allow-listed ones "
              "(a dictionary lookup on the sample name); its cost grows with the allow-listed "
              "samples, the full parser's with all of them.", ""]
    return lines


def poll_cost(rec: dict[str, Any], goals: list[tuple[str, str, str, bool | None]]) -> list[str]:
    d = rec["data"]
    c = d["cycle"]
    cpu = c["cpu"]
    lines = [
        f"In process: {c['cycles']} cycles after {c['warmup']} of warm-up; sources up: "
        f"{c['sources_up']}; the exposition has {c['exposition_samples']} samples "
        f"({c['exposition_bytes']:,} bytes).", "",
        "| measure (time.process_time, all threads) | median | p99 | min | max |",
        "| --- | --- | --- | --- | --- |",
        f"| **one `await loop.cycle()`** | **{ms(cpu['median_ms'])}** | {ms(cpu['p99_ms'])} "
        f"| {ms(cpu['min_ms'])} | {ms(cpu['max_ms'])} |",
        f"| the same cycle, wall clock | {ms(c['wall']['median_ms'])} | {ms(c['wall']['p99_ms'])}"
        f" | {ms(c['wall']['min_ms'])} | {ms(c['wall']['max_ms'])} |",
    ]
    in_cycle = c.get("parts_in_cycle", list(c["parts_cpu"]))
    parts_total = sum(c["parts_cpu"][name]["median_ms"] for name in in_cycle)
    for name, part in c["parts_cpu"].items():
        lines.append(f"| part alone: {name} | {ms(part['median_ms'])} | {ms(part['p99_ms'])} "
                     f"| {ms(part['min_ms'])} | {ms(part['max_ms'])} |")
    for name, part in c.get("whatif_cpu", {}).items():
        lines.append(f"| {name} | {ms(part['median_ms'])} | {ms(part['p99_ms'])} "
                     f"| {ms(part['min_ms'])} | {ms(part['max_ms'])} |")
    r = c["render_after_cycle_cpu"]
    lines += [f"| not in the cycle: one uncached /metrics render | {ms(r['median_ms'])} "
              f"| {ms(r['p99_ms'])} | {ms(r['min_ms'])} | {ms(r['max_ms'])} |", ""]
    ok = cpu["median_ms"] < GOALS["cycle_cpu_ms"]
    goals.append(("poll cycle CPU (example snapshot + SGLang /metrics)",
                  f"< {GOALS['cycle_cpu_ms']:g} ms", f"median {ms(cpu['median_ms'])}, p99 "
                  f"{ms(cpu['p99_ms'])}", ok))
    validation = c["parts_cpu"].get("snapshot: jsonschema validation (shipped validator)")
    rest = cpu["median_ms"] - parts_total
    text = (f"The cycle's parts called alone (whole parse_snapshot, pass-through parse and fold, "
            "host poll, "
            f"the two GETs, the two thread hand-offs) add up to {ms(parts_total)} of the median "
            f"{ms(cpu['median_ms'])}; the other {ms(max(0.0, rest))} is the poll loop's own work "
            "(derive, restore-window step, health records) and what running them together costs "
            "(a third thread for the host source, GIL hand-overs, garbage collection).")
    if validation:
        text += (f" The single largest part is the JSON Schema validation of the snapshot, "
                 f"{ms(validation['median_ms'])} ({validation['median_ms'] / cpu['median_ms']:.0%}"
                 " of the cycle).")
    if not ok:
        text += (f" The goal is missed by {ms(cpu['median_ms'] - GOALS['cycle_cpu_ms'])}; "
                 f"the fastest cycle took {ms(cpu['min_ms'])}: see *Analysis*.")
    lines += [text, ""]
    s = d.get("steady")
    if s:
        lines += [
            f"Steady state: the real sidecar, `--poll-interval {s['poll_interval_s']:g}`, scraped "
            f"every {s['scrape_interval_s']:g} s ({s['scrapes']['ok']} scrapes ok, "
            f"{s['scrapes']['failed']} failed) for {s['seconds']:.0f} s after 5 s of warm-up.", "",
            "| measure | value | goal | |", "| --- | --- | --- | --- |",
            f"| CPU (utime+stime / wall) | {pct(s['cpu_share'], 2)} of a core "
            f"({s['cpu_s']:.2f} s) | < {pct(GOALS['steady_cpu_share'])} "
            f"| {yes(s['cpu_share'] < GOALS['steady_cpu_share'])} |",
            f"| RSS start / end / max | {s['rss_start_mib']:.1f} / {s['rss_end_mib']:.1f} / "
            f"{s['rss_max_mib']:.1f} MiB | < {GOALS['steady_rss_mib']:g} MiB "
            f"| {yes(s['rss_max_mib'] < GOALS['steady_rss_mib'])} |",
            f"| threads, open fds at end | {s['threads']}, {s['fds']} | | |",
            f"| simulated engine's CPU, for scale | {pct(s['engine_cpu_share'], 1)} | | |", "",
            "utime and stime are counted in clock ticks (10 ms), so over "
            f"{s['seconds']:.0f} s the CPU share is exact to about "
            f"{0.01 / s['seconds'] * 100:.2f} percentage points.", ""]
        goals.append(("steady CPU at a 1 s poll", f"< {pct(GOALS['steady_cpu_share'])} of a core",
                      pct(s["cpu_share"], 2), s["cpu_share"] < GOALS["steady_cpu_share"]))
        goals.append(("steady RSS at a 1 s poll", f"< {GOALS['steady_rss_mib']:g} MiB",
                      f"{s['rss_max_mib']:.1f} MiB (max)",
                      s["rss_max_mib"] < GOALS["steady_rss_mib"]))
    return lines


def soak(rec: dict[str, Any], goals: list[tuple[str, str, str, bool | None]]) -> list[str]:
    d = rec["data"]
    flips = ", ".join(f"{k} {v}" for k, v in sorted(d["flips"].items()))
    lines = [
        f"`--poll-interval {d['poll_interval_s']:g}`; the engine flipped every "
        f"{d['flip_every_s']:g} s ({flips}; {d['flips_failed']} failed); the sidecar logged "
        f"{d['restore_transitions_logged']} restore-window transitions and counted "
        f"{d['source_errors_during']:,.0f} source errors during the measured part.", "",
        "| measure | value | goal | |", "| --- | --- | --- | --- |",
        f"| poll cycles measured (after {d['warmup_cycles']:,.0f} of warm-up) "
        f"| {d['cycles_measured']:,.0f} in {d['seconds']:.0f} s ({d['cycles_per_s']:.0f}/s) "
        f"| >= {d['cycles_target']:,} | {yes(d['reached'])} |",
        f"| RSS after warm-up -> end | {d['rss_start_mib']:.1f} -> {d['rss_end_mib']:.1f} MiB "
        f"(**{d['rss_growth_mib']:+.2f} MiB**; min {d['rss_min_mib']:.1f}, max "
        f"{d['rss_max_mib']:.1f}) | growth < {GOALS['soak_rss_growth_mib']:g} MiB "
        f"| {yes(d['rss_growth_mib'] < GOALS['soak_rss_growth_mib'])} |",
        f"| open fds after warm-up -> end | {d['fds_start']} -> {d['fds_end']} (max "
        f"{d['fds_max']}; peak first half {d.get('fds_first_half_max', '?')}, second half "
        f"{d.get('fds_second_half_max', '?')}) | no growth | {yes(_fds_ok(d))} |",
        f"| threads after warm-up -> end | {d['threads_start']} -> {d['threads_end']} | | |",
        f"| sidecar CPU during the soak | {pct(d['cpu_share'])} of a core | | |", "",
    ]
    goals.append(("soak cycles against a flapping engine", f">= {d['cycles_target']:,}",
                  f"{d['cycles_measured']:,.0f}", d["reached"]))
    goals.append(("soak RSS growth", f"< {GOALS['soak_rss_growth_mib']:g} MiB",
                  f"{d['rss_growth_mib']:+.2f} MiB",
                  d["rss_growth_mib"] < GOALS["soak_rss_growth_mib"]))
    goals.append(("soak open fds", "no growth (peak of second half <= peak of first half)",
                  f"{d['fds_start']} -> {d['fds_end']}, peaks {d.get('fds_first_half_max')} / "
                  f"{d.get('fds_second_half_max')}", _fds_ok(d)))
    if not d["reached"]:
        lines += [f"The cycle target was not reached within the section's time limit: cycles ran "
                  f"at {d['cycles_per_s']:.0f}/s with the sidecar at {pct(d['cpu_share'])} of a "
                  "core, i.e. each cycle mostly waits for the simulated engine (a Python process "
                  "sharing the same 2 cores) and for CPU.", ""]
    curve = d.get("curve") or []
    if curve:
        pts = curve[:: max(1, len(curve) // 8)]
        lines += ["RSS along the soak (cycles: MiB): "
                  + ", ".join(f"{c:,.0f}: {r:.1f}" for c, r, _ in pts) + ".", ""]
    return lines


def alert_latency(rec: dict[str, Any], goals: list[tuple[str, str, str, bool | None]]) -> list[str]:
    d = rec["data"]
    f, s = d["floor"], d["summary"]
    lines = [
        f"`{d['alert']}` from the restore deadline to the firing POST at a webhook, through "
        f"{d['setup']['prometheus']} (scrape and evaluation {d['setup']['evaluation_interval']}, "
        f"rules {', '.join(d['setup']['rule_files'])}) and {d['setup']['alertmanager']} "
        f"({d['setup']['am_config']}). Floor = evaluation interval {f['evaluation_interval_s']:g} s"
        f" + `for` {f['for_s']:g} s + group_wait {f['group_wait_s']:g} s = "
        f"**{f['total_s']:g} s**: what Prometheus and Alertmanager add at most before the first "
        "notification with this configuration.", "",
        "| rep | deadline -> rule active | rule active -> webhook | breach -> webhook | floor "
        "| window close -> resolved POST |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in d["runs"]:
        lines.append(f"| {r['rep']} | {r['deadline_to_active_s']:.3f} s "
                     f"| {r['active_to_webhook_s']:.3f} s | **{r['breach_to_webhook_s']:.3f} s** "
                     f"| {f['total_s']:g} s | {r['close_to_resolved_s']:.3f} s |")
    within = s["max_s"] <= f["total_s"]
    lines += ["", f"breach -> webhook: min {s['min_s']:.3f} s, median {s['median_s']:.3f} s, max "
              f"{s['max_s']:.3f} s over {s['reps']} repetition(s); "
              + ("every repetition within the floor." if within else
                 f"the max is {s['max_s'] - f['total_s']:.3f} s over the floor."), ""]
    goals.append(("breach-to-webhook alert latency (reference: the floor)",
                  f"<= floor {f['total_s']:g} s",
                  f"median {s['median_s']:.2f} s, max {s['max_s']:.2f} s", within))
    return lines


def nvml_poll(rec: dict[str, Any], goals: list[tuple[str, str, str, bool | None]]) -> list[str]:
    rows = rec["data"]["rows"]
    lines = ["`NvmlSource.poll()` through the real pynvml bindings into the fake driver "
             "(tools/fake_nvml.c, compiled by the script); per-GPU threads, 14 NVML calls per"
             " GPU. A real driver adds its own time per call.", "",
             "| driver | GPUs | polls | min | median | p95 | max | median per GPU |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['driver']} | {r['gpus']} | {r['polls']} | {ms(r['min_ms'])} "
                     f"| {ms(r['median_ms'])} | {ms(r['p95_ms'])} | {ms(r['max_ms'])} "
                     f"| **{ms(r['per_gpu_ms'])}** |")
    worst = max(r["per_gpu_ms"] for r in rows)
    lo, hi = NVML_DOC_RANGE_MS
    lines += ["", f"docs/gpu.md states roughly {lo}-{hi} ms per GPU against the fake; the issue "
              "sets no goal for this figure, so it is reported, not judged.", ""]
    goals.append(("NVML poll per GPU, fake driver (no goal; docs/gpu.md says ~"
                  f"{lo}-{hi} ms)", "none", f"max median/GPU {ms(worst)}", None))
    return lines


def _interval(d: dict[str, Any] | None) -> str:
    if d is None:
        return "-"
    return (f"{d['estimate'] * 100:+.1f}% [{d['low'] * 100:+.1f}%, {d['high'] * 100:+.1f}%]"
            + ("" if d["resolved"] else ", not resolved"))


def observer_cost(rec: dict[str, Any], goals: list[tuple[str, str, str, bool | None]]) -> list[str]:
    d = rec["data"]
    if "observer_cost" not in d:  # the figures of the earlier, retired bench/observer_cost.py
        goals.append(("observer cost of the sidecar's polling (no goal: reported)", "none",
                      "not measured by the current method", None))
        return ["Not measured by the current method: these raw figures come from the earlier "
                "bench/observer_cost.py (its own polling at concurrency 1, a fresh engine per "
                "arm), which this page no longer reports. Run `bench/run --only observer_cost`.",
                ""]
    doc = d["observer_cost"]
    m = d["measured"]
    lines = [
        f"Measured {m['date']} at commit `{m['git_commit']}`"
        + (" with uncommitted changes under exporter/ or simulator/"
           if m.get("exporter_tree_dirty") else "")
        + f". `helios-exporter observer-cost` with the sidecar's polling as the observer: a "
        f"second sidecar polling every {d['poll_interval']:g} s (the production interval) "
        "started by `--on` and stopped by `--off`, beside a sidecar that brackets the phases and "
        "polls only at their edges. Simulated engine (`simulate --scenario idle --time-scale "
        f"{d['time_scale']:g}`, seed 7), the `fixture-1024` corpus "
        f"{doc['requests_per_repetition']:,} requests a repetition, C1 and C4 warmed on their "
        f"own, {doc['repetitions']} repetitions an arm in an order drawn from seed "
        f"{doc['seed']} and written down first; every repetition checked "
        f"({sum(s['valid'] for s in doc['steps'] if s['arm'])} of "
        f"{sum(1 for s in doc['steps'] if s['arm'])} valid). Judged on the client's clock: the "
        "simulator's histogram records the latency it models, which polling never touches, so "
        "it cannot show this cost and is left out here (it is in the raw figures).", "",
        "| concurrency | polling on vs off, client latency | throughput (req/s) | "
        "client mean per repetition, off | on |",
        "| --- | --- | --- | --- | --- |"]
    for r in doc["results"]:
        means = {arm: ", ".join(ms(s["figures"]["client"]["mean"] * 1000)
                                for s in doc["steps"]
                                if s["concurrency"] == r["concurrency"] and s["arm"] == arm)
                 for arm in ("off", "on")}
        judged = r if r["estimate"] is not None else None
        lines.append(f"| C{r['concurrency']} | {_interval(judged)} | "
                     f"{_interval(r['throughput'])} | {means['off']} | {means['on']} |")
    if doc.get("witness"):
        lines += ["", "On vs off: the pairs' geometric mean ratio of the on repetition's mean over "
                  "the off one's, minus 1, and its 95 % t-interval from the pairs; the switch "
                  f"verified by `{doc['witness']}` after every switch and every repetition.", ""]
    else:
        lines += ["", "On vs off: the on arm's mean over the off arm's, minus 1, and its 95 % "
                  "interval from the repetitions (Welch t on the log ratio).", "",
                  "**Measured before observer-cost verified its switch** (issue 33): nothing "
                  "showed that the polling sidecar polled during an on repetition, and at C4 a "
                  "repetition (about 4 s) was shorter than the 5 s between polls, so an on "
                  "repetition there held one poll at most, possibly none. The current command "
                  "pairs the "
                  "repetitions and refuses a repetition whose switch its witness does not show; "
                  "`bench/run --only observer_cost` measures it again.", ""]
    lines += [f"- **C{r['concurrency']}**: {r['sentence']}" for r in doc["results"]]
    lines.append("")
    c1 = next((r for r in doc["results"] if r["concurrency"] == 1), doc["results"][0])
    figure = (_interval(c1) if c1["estimate"] is not None else "cannot conclude")
    goals.append((f"observer cost, polling every {d['poll_interval']:g} s, C"
                  f"{c1['concurrency']} client mean vs off, 95 % interval, on the SIMULATED "
                  "engine (no goal: reported)",
                  "none", figure, None))
    return lines


def scrape_cost(rec: dict[str, Any], goals: list[tuple[str, str, str, bool | None]]) -> list[str]:
    d = rec["data"]
    compress = d["gzip_compress_cpu_ms"]
    lines = [
        f"One sidecar scraped by {d['load_generator']}, {d['duration_s']:g} s per point, the "
        "variants alternating order per client count: no Accept-Encoding (*identity*), "
        "`Accept-Encoding: gzip` as Prometheus sends it (*gzip*), and a second sidecar with "
        "`--web-config-file` (TLS, basic auth with a bcrypt cost-10 hash) scraped with gzip and "
        f"the right password on every request (*tls+auth*). Body {d['identity_bytes']:,} bytes, "
        f"{d['gzip_bytes']:,} gzipped; compressing it once in-process costs {ms(compress)} of "
        "CPU (gzip level 6, median of 200): what every gzip scrape would add without the cache.",
        "", "| variant | clients | req/s | p50 | p99 | bytes/answer | sidecar CPU per scrape "
        "| errors |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    by: dict[tuple[str, int], dict[str, Any]] = {}
    for variant, points in d["points"].items():
        for p in points:
            by[(variant, p["clients"])] = p
            lines.append(f"| {variant} | {p['clients']} | {p['rps']:,.0f} | {ms(p['p50_ms'])} "
                         f"| {ms(p['p99_ms'])} | {p['bytes_per_response']:,.0f} "
                         f"| {ms(p['server_cpu_ms_per_scrape'])} | {p['errors']} |")
    lines += ["", "CPU per scrape is the sidecar's CPU time over the point (poll cycles and the "
              "one compression per cycle included) divided by the answers it gave.", ""]
    for clients in d["clients"]:
        ident, gz = by.get(("identity", clients)), by.get(("gzip", clients))
        if ident is None or gz is None:
            continue
        excess = gz["server_cpu_ms_per_scrape"] - ident["server_cpu_ms_per_scrape"]
        goals.append((f"gzip scrape CPU over identity's, {_clients(clients)}",
                      f"< {GOALS['gzip_excess_share']:g} x one compression ({ms(compress)})",
                      f"{excess * 1000:+.0f} µs ({ms(gz['server_cpu_ms_per_scrape'])} vs "
                      f"{ms(ident['server_cpu_ms_per_scrape'])})",
                      excess < GOALS["gzip_excess_share"] * compress))
    return lines


def _fds_ok(d: dict[str, Any]) -> bool:
    if "fds_second_half_max" in d:
        return bool(d["fds_second_half_max"] <= d["fds_first_half_max"])
    return bool(d["fds_end"] <= d["fds_start"])


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
                "change (exporter/passthrough.py, not made here): keep a bounded cache from a "
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
                         "(exporter/snapshot.py, not made here): inline the `$defs` when the "
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
                    f"- **/metrics p99 at {_clients(clients)}: {ms(sc['p99_ms'])} against "
                    f"node-exporter's p50 {ms(ne['p50_ms'])}.** The sidecar's p50 was "
                    f"{ms(sc['p50_ms'])} and p90 {ms(sc['p90_ms'])}, max {ms(sc['max_ms'])}: a "
                    "tail of stalls, not a slow path. During the point the sidecar got "
                    f"{pct(sc['cpu_share']['server'])} of a core while other processes on the "
                    f"machine used {other:.2f} cores; a Python event loop that is not scheduled "
                    "for tens of milliseconds holds every open request that long. Re-run on a "
                    "quiet machine before reading this as a regression.")
            if ne["rps"] and sc["rps"] / ne["rps"] < GOALS["throughput"]:
                out.append(
                    f"- **/metrics throughput at {_clients(clients)}: {sc['rps'] / ne['rps']:.1f}x."
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
        "committed run are in `bench/results/latest.json` (`bench/report.py` re-renders them).",
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
  `bench/observer_cost.py`, `bench/scrape_cost.py`, and with `--scale` `bench/scale.py` (an hour or
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

