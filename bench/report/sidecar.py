"""docs/benchmarks.md's sections on what the sidecar costs (bench/report/report.py renders the page):
1 /metrics throughput and latency, 2 engine ingest, 3 the poll cycle, 4 the soak, 8 what a scrape
costs with gzip and TLS."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: `bench` importable
from bench.report.format import GOALS, client_count, ms, pct, yes


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
        goals.append((f"/metrics throughput, {client_count(clients)}",
                      f">= {GOALS['throughput']:g}x node-exporter",
                      f"{sc['rps']:,.0f} vs {ne['rps']:,.0f} req/s = {ratio:.1f}x",
                      ratio >= GOALS["throughput"]))
        goals.append((f"/metrics sidecar p99 vs node-exporter p50, {client_count(clients)}",
                      "sidecar p99 < node-exporter p50",
                      f"{ms(sc['p99_ms'])} vs {ms(ne['p50_ms'])}", sc["p99_ms"] < ne["p50_ms"]))
        server = sc["cpu_share"]["server"]
        if sc["wrk_cpu_share"] < 0.5 and server < 0.9:
            notes.append(
                f"At {client_count(clients)} the sidecar process used {pct(server)} of a core and wrk "
                f"{pct(sc['wrk_cpu_share'])}; the machine was {pct(sc['machine_busy_share'])} busy"
                f" with {sc['other_cores']:.2f} cores taken by other processes, so the sidecar "
                "(one event loop, one core at most) was short of CPU rather than of work: its "
                "figures are a lower bound for this machine.")
        elif sc["wrk_cpu_share"] < server:
            notes.append(f"At {client_count(clients)} wrk used {pct(sc['wrk_cpu_share'])} of a core "
                         f"against the sidecar's {pct(server)}: the server, not the load "
                         "generator, is the bottleneck.")
        else:
            notes.append(f"At {client_count(clients)} wrk used {pct(sc['wrk_cpu_share'])} of a core, "
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
        "`exporter.sources.engine_metrics.parse(text, cache=cache)` then `passthrough_totals.fold` into "
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
    kind = d.get("cycle_sglang")
    if kind:  # the same cycle of `serve --engine-kind sglang`, measured in the same run
        k = kind["cpu"]
        lines.insert(-1, f"| one cycle of `--engine-kind sglang` (SGLang's own exposition, "
                         f"{kind['exposition_bytes']:,} bytes) | {ms(k['median_ms'])} | "
                         f"{ms(k['p99_ms'])} | {ms(k['min_ms'])} | {ms(k['max_ms'])} |")
        goals.append(("poll cycle CPU, `--engine-kind sglang` (SGLang 0.5.23's /metrics)",
                      f"< {GOALS['cycle_cpu_ms']:g} ms", f"median {ms(k['median_ms'])}, p99 "
                      f"{ms(k['p99_ms'])}", k["median_ms"] < GOALS["cycle_cpu_ms"]))
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
        goals.append((f"gzip scrape CPU over identity's, {client_count(clients)}",
                      f"< {GOALS['gzip_excess_share']:g} x one compression ({ms(compress)})",
                      f"{excess * 1000:+.0f} µs ({ms(gz['server_cpu_ms_per_scrape'])} vs "
                      f"{ms(ident['server_cpu_ms_per_scrape'])})",
                      excess < GOALS["gzip_excess_share"] * compress))
    return lines


def _fds_ok(d: dict[str, Any]) -> bool:
    if "fds_second_half_max" in d:
        return bool(d["fds_second_half_max"] <= d["fds_first_half_max"])
    return bool(d["fds_end"] <= d["fds_start"])
