"""docs/scale.md's figures, from bench/scale/scale.py's stored result: written between the page's
GENERATED markers by `bench/report/scale.py --docs docs/scale.md` (and `scripts/generate`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: `bench` importable
from bench.scale.results import (
    by_group,
    format_count,
    format_ms,
    largest,
    live_result,
    prom_cpu,
    rules_result,
)

DOCS_BEGIN = "<!-- BEGIN GENERATED: scale figures (bench/report/scale.py --docs) -->"
DOCS_END = "<!-- END GENERATED: scale figures -->"


def summary(d: dict[str, Any]) -> list[str]:
    """docs/scale.md's figures: per fleet size, series, the slowest rule group and query."""
    runs = sorted(d["runs"], key=lambda r: r["engines"])
    m = d["machine"]
    goal_rule, goal_query = d["goals"]["rule_group_ms"], d["goals"]["query_ms"]
    lines = [
        f"Measured {m['date'][:16].replace('T', ' ')} UTC at commit `{m['git_commit']}` on "
        f"{m['nproc']} CPUs ({m['cpu_model']}, {m['memory_gib']} GiB, "
        f"{'a virtual machine' if m.get('virtualized') else 'bare metal'}) shared with other "
        f"work, with {d['prometheus'].split(' (')[0]}; every query repeated "
        f"{runs[0]['queries'][0]['reps'] if runs and runs[0]['queries'] else 0} times, every "
        "group over several evaluations. Medians, with the maximum in brackets."
        + (f" {d['note']}" if d.get("note") else ""), "",
        "| engines | series per engine | head series | Prometheus RSS | slowest rule group "
        f"(< {goal_rule:g} ms) | slowest dashboard query (< {goal_query:g} ms) | queries over "
        f"{goal_query:g} ms | load average during |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rd = rules_result(d)
    rule_runs = {r["engines"]: r for r in rd["runs"]}
    for r in runs:
        group = max(rule_runs.get(r["engines"], r)["rules"], key=lambda g: g["median_ms"] or 0.0)
        query = max(r["queries"], key=lambda q: q["median_ms"])
        over = sum(q["median_ms"] >= goal_query for q in r["queries"])
        load = r.get("machine_during_measurement", {})
        lines.append(
            f"| {r['engines']:,} | {r['series_per_engine']['median']:.0f} "
            f"| {r['head_series']:,.0f} | {r['prometheus_rss_bytes'] / 2**20:,.0f} MiB "
            f"| {group['group']}: {format_ms(group['median_ms'])} ({format_ms(group['max_ms'])}) "
            f"| {query['dashboard'].removesuffix('.json')}, {query['panel']}: "
            f"{format_ms(query['median_ms'])} ({format_ms(query['max_ms'])}) "
            f"| {over} of {len(r['queries'])} "
            f"| {' / '.join(f'{x:.1f}' for x in load.get('loadavg_before', []))}"
            f"{prom_cpu(load)} |")
    rule_list = sorted(rd["runs"], key=lambda r: r["engines"])
    if rd is not d:
        rm = rd["machine"]
        lines += ["", f"The rule groups were measured again on "
                  f"{rm['date'][:16].replace('T', ' ')} UTC at commit `{rm['git_commit']}`, "
                  "alone (no dashboard queries), on a block store of that commit's series model"
                  "; the table above takes its slowest group from that run."
                  + (f" {rd['note']}" if rd.get("note") else "")]
    live = live_result(rd) if rd is not d else None
    live_groups: dict[str, Any] = {}
    if live:
        live_big = largest(live)
        live_groups = by_group(live_big)
        lm = live["machine"]
        lines += ["", f"The last column: the same rules at {live_big['engines']:,} engines "
                  f"(measured {lm['date'][:16].replace('T', ' ')} UTC at commit "
                  f"`{lm['git_commit']}`) after Prometheus had "
                  f"scraped the fleet live for {live['live_minutes']:g} minutes, so that the "
                  "last hour was in its head block, as in a Prometheus that has run for hours; "
                  "the other columns read everything older than a few minutes from backfilled "
                  "blocks."]
    lines += ["", "Each rule group: evaluation time (median) and the samples its rules read in one "
              "evaluation:", "",
              "| group | rules | "
              + " | ".join(f"{r['engines']:,} engines" for r in rule_list)
              + (f" | {max(r['engines'] for r in live['runs']):,} engines, "
                 f"{live['live_minutes']:g} min live" if live else "") + " |",
              "| --- | --- | "
              + " | ".join("---" for _ in rule_list) + (" | ---" if live else "") + " |"]
    by_run = [{g["group"]: g for g in r["rules"]} for r in rule_list]
    for name, g in sorted(by_run[-1].items(), key=lambda kv: (kv[1]["file"], kv[0])):
        cells = [f"{format_ms(x['median_ms'])}, {format_count(x.get('samples'))} samples"
                 if (x := rules.get(name)) else "-" for rules in by_run]
        if live:
            x = live_groups.get(name)
            cells.append(f"{format_ms(x['median_ms'])}, {format_count(x.get('samples'))} samples"
                         if x else "-")
        lines.append(f"| {name} | {g['rules']} | {' | '.join(cells)} |")
    return lines


def splice_docs(page: str, data: dict[str, Any]) -> str:
    """`page` (docs/scale.md) with the summary between its markers."""
    pattern = re.compile(re.escape(DOCS_BEGIN) + r".*?" + re.escape(DOCS_END), re.S)
    if not pattern.search(page):
        raise SystemExit(f"no {DOCS_BEGIN} ... {DOCS_END} in the page")
    body = "\n".join([DOCS_BEGIN, *summary(data), DOCS_END])
    return pattern.sub(lambda _: body, page)
