"""The "Scale" section of docs/benchmarks.md, from bench/scale/scale.py's result.

bench/report/report.py renders it with the other sections: from this invocation's run when bench/run ran
the section (`bench/run --scale`), else from the stored result bench/results/scale.json (the scale
run takes an hour or more, so a plain `bench/run` keeps the last one and says when it was made).

    .venv/bin/python bench/report/scale.py --into docs/benchmarks.md

puts the stored result into an existing page (its section and its rows of the goals table)
without re-rendering the rest, and

    .venv/bin/python bench/report/scale.py --docs docs/scale.md

writes its summary (bench/report/scale_docs.py) between the page's GENERATED markers
(tests/bench/test_scale.py checks that they agree with the stored result).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: `bench` importable
from bench.report.scale_docs import splice_docs
from bench.scale.results import (
    RULES,
    RULES_LIVE,
    STORED,
    by_group,
    format_count,
    format_ms,
    largest,
    live_result,
    prom_cpu,
    rules_result,
    stored_record,
)

# What bench/report/report.py, scripts/generate and the tests read from here.
__all__ = ["RULES", "RULES_LIVE", "STORED", "TITLE", "analysis", "live_result", "render",
           "rules_result", "splice", "splice_docs", "stored_record"]

TITLE = "9. Scale: rules and dashboards at 100 and 1,000 engines"
Goal = tuple[str, str, str, bool | None]


def _yes(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "n/a"}[ok]


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def render(rec: dict[str, Any], goals: list[Goal]) -> list[str]:
    d = rec["data"]
    runs = sorted(d["runs"], key=lambda r: r["engines"])
    m, model = d["machine"], d["model"]
    goal_query = d["goals"]["query_ms"]
    big = runs[-1]
    lines: list[str] = []
    if rec.get("stored"):
        lines += [f"Not re-run by this invocation: the stored result (bench/results/scale.json), "
                  f"measured {m['date']} at commit `{m['git_commit']}`; `bench/run --scale` "
                  "measures it again.", ""]
    lines += [
        f"{d['prometheus']}, rule files {', '.join(f'`{f}`' for f in d['rule_files'])}, "
        f"dashboards {', '.join(f'`{x}`' for x in d['dashboards'])}; evaluation and scrape "
        f"interval {model['scrape_interval_s']} s, on this machine ({m['nproc']} CPUs, "
        f"{m['memory_gib']} GiB). Each engine's series are the full golden exposition "
        f"(`{model['golden']}`) with its own cluster, job, instance, pod, generation and GPU "
        "labels and values that move as a sidecar's do (`bench/scale/series.py`): counters "
        "grow, one engine in "
        f"{model['scenario_period']} each has a restore window open, closed in time, closed late, "
        "open past its restore deadline, an unplanned restart or a lost GPU"
        + (f"; one engine in {model['host_tier_period']} drops host stores as the golden does "
           f"and another in {model['host_tier_period']} restores nothing from the host tier (nor "
           "does the golden); the others restore tokens and drop no store. "
           if "host_tier_period" in model else ". ") +
        f"{model['hours']:g} h of history were backfilled with `{d['promtool'].split(',')[0]} "
        "tsdb create-blocks-from openmetrics` (the families read through ranges longer than 10 "
        f"minutes, {', '.join(f'`{f}`' for f in model['history_families'])}, "
        f"{model['history_hours']:g} h more), then Prometheus scraped the same model live (one "
        "target per 100 engines, `honor_labels`) while the rules ran. Dashboard queries are the "
        "ones Grafana sends on load with the variables at their defaults (All clusters, "
        "generations and GPUs; the first sidecar), over the last "
        f"{d['range_s'] / 3600:g} h, with Grafana's step for a 1920 px wide browser "
        "(`bench/scale/queries.py`); time to the whole answer, from this client. *samples* is "
        "what Prometheus's query stats count as read (`totalQueryableSamples`): the cost "
        "whatever CPU the query got." + (f" {d['note']}" if d.get("note") else ""), "",
        "| engines | series per engine (min-max) | recorded per engine | head series | Prometheus "
        "RSS | backfill | gap before live | machine during measurement |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        s, rec_s = r["series_per_engine"], r["recorded_series_per_engine"]
        samples = sum(b["samples"] for b in r["build"])
        seconds = sum(b["seconds"] for b in r["build"])
        load = r.get("machine_during_measurement", {})
        busy = load.get("busy_share")
        lines.append(
            f"| {r['engines']:,} | **{s['median']:.0f}** ({s['min']:.0f}-{s['max']:.0f}) "
            f"| {rec_s['median']:.0f} | {r['head_series']:,.0f} "
            f"| {r['prometheus_rss_bytes'] / 2**20:,.0f} MiB | {samples:,} samples in "
            f"{seconds / 60:.0f} min | {r['gap_s']:.0f} s "
            f"| load {' / '.join(f'{x:.1f}' for x in load.get('loadavg_before', []))}, "
            f"{'-' if busy is None else f'{busy:.0%}'} busy{prom_cpu(load)} |")
    lines += ["", "Series per engine count what one sidecar exports (with the 5 series "
              "Prometheus adds per target); recorded per engine, the recording rules' output "
              "for it. *backfill* is what this run had to add to the reusable block store.", "",
              "### Rule groups", ""]
    lines += rule_groups(d, goals)
    lines += ["", "### Dashboard queries", "",
              "Median (max) of the repeats; *series* is the answer's series at "
              f"{big['engines']:,} engines.", "",
              "| dashboard | query | kind, step | " + " | ".join(
                  f"{r['engines']:,}" for r in runs) + f" | series | samples | < {goal_query:g} ms |",
              "| --- | --- | --- | " + " | ".join("---" for _ in runs) + " | --- | --- | --- |"]
    keyed = [{(q["dashboard"], q["panel"], q["ref"]): q for q in r["queries"]} for r in runs]
    for key, q in keyed[-1].items():
        cells = [("-" if (x := k.get(key)) is None
                  else f"{format_ms(x['median_ms'])} ({format_ms(x['max_ms'])})") for k in keyed]
        kind = q["kind"] + (f", {q['step_s']:g} s" if q.get("step_s") else "")
        panel = q["panel"] + (f" ({q['ref']})" if q["kind"] in ("range", "instant") else "")
        lines.append(f"| {q['dashboard'].removesuffix('.json')} | {panel} | {kind} | "
                     f"{' | '.join(cells)} | {q['series']:,} | {format_count(q.get('samples'))} | "
                     f"{_yes(q['median_ms'] < goal_query)} |")
    slowest = max(big["queries"], key=lambda q: q["median_ms"])
    missed = [q for q in big["queries"] if q["median_ms"] >= goal_query]
    goals.append((f"slowest dashboard query at {big['engines']:,} engines "
                  f"({slowest['dashboard'].removesuffix('.json')}: {slowest['panel']})",
                  f"< {goal_query:g} ms", f"median {format_ms(slowest['median_ms'])}, max "
                  f"{format_ms(slowest['max_ms'])}; {len(missed)} of {len(big['queries'])} over",
                  not missed))
    lines += ["", f"Prometheus's own work at {big['engines']:,} engines before measuring: "
              f"{big['compaction']['vertical_compactions'] or 0:.0f} vertical compactions of the "
              f"backfilled blocks ({big['blocks_assembled']} blocks assembled, "
              f"{big['compaction']['blocks'] or 0:.0f} after); the live feed started "
              f"{_utc(big['prometheus_start'])}.", ""]
    return lines


def rule_groups(d: dict[str, Any], goals: list[Goal]) -> list[str]:
    """The rule-group table (and its goal row): from a newer rules-only run when there is one."""
    rd = rules_result(d)
    goal_rule = rd["goals"]["rule_group_ms"]
    runs = sorted(rd["runs"], key=lambda r: r["engines"])
    big = runs[-1]
    lines: list[str] = []
    if rd is not d:
        m = rd["machine"]
        lines += [
            f"Measured again {m['date'][:16].replace('T', ' ')} UTC at commit "
            f"`{m['git_commit']}`, the rules alone (`bench/results/{RULES.name}`: "
            f"`{rd['command']}`), on a block store of the series model of that commit "
            f"({rd['model']['hours']:g} h of every family, {rd['model']['history_hours']:g} h "
            "more of those read further back), with the same live feed; "
            + (f"{rd['note']} " if rd.get("note") else "")
            + "The dashboard queries below are from the run above.", ""]
    lines += ["`evaluationTime` of each group from /api/v1/rules over distinct evaluations; "
              "*samples* read by its rules in one evaluation.", ""]
    head = "| group | file | rules | "
    live = live_result(rd) if rd is not d else None
    live_big = largest(live) if live else None
    live_groups = by_group(live_big)
    head += " | ".join(f"{r['engines']:,}: median (max)" for r in runs)
    if live and live_big:
        head += f" | {live_big['engines']:,}, {live['live_minutes']:g} min live: median (max)"
    head += (f" | samples read at {big['engines']:,} | slowest rule at {big['engines']:,} "
             f"| < {goal_rule:g} ms |")
    lines += [head, "|" + " --- |" * (head.count("|") - 1)]
    by_run = [{g["group"]: g for g in r["rules"]} for r in runs]
    for name, g in sorted(by_run[-1].items(), key=lambda kv: (kv[1]["file"], kv[0])):
        cells = []
        for rules in by_run:
            x = rules.get(name)
            cells.append("-" if x is None else f"{format_ms(x['median_ms'])} ({format_ms(x['max_ms'])})")
        if live_big:
            x = live_groups.get(name)
            cells.append("-" if x is None else f"{format_ms(x['median_ms'])} ({format_ms(x['max_ms'])})")
        ok = g["median_ms"] is not None and g["median_ms"] < goal_rule
        slow = (f"`{g['slowest_rule']}` {format_ms(g['slowest_rule_median_ms'])}"
                if g["slowest_rule"] else "-")
        errors = f"; errors: {'; '.join(g['errors'])}" if g["errors"] else ""
        lines.append(f"| {name} | {g['file']} | {g['rules']} | {' | '.join(cells)} | "
                     f"{format_count(g.get('samples'))} | {slow}{errors} | {_yes(ok)} |")
    if live and live_big:
        lm = live["machine"]
        load = live_big.get("machine_during_measurement", {})
        lines += ["", f"*{live['live_minutes']:g} min live*: the same rule files and store, measured "
                  f"{lm['date'][:16].replace('T', ' ')} UTC at commit `{lm['git_commit']}` "
                  f"(`bench/results/{RULES_LIVE.name}`), "
                  f"after Prometheus had scraped the fleet live for {live['live_minutes']:g} "
                  "minutes: the last hour in its head block, as in a Prometheus that has run "
                  "for hours, and the older part of the 3-hour memory in the backfilled blocks "
                  f"(load {' / '.join(f'{x:.1f}' for x in load.get('loadavg_before', []))}"
                  f"{prom_cpu(load)}). The other columns read everything older than the start "
                  "of the live feed, a few minutes, from backfilled blocks."]
    worst = max(big["rules"], key=lambda g: g["median_ms"] or 0.0)
    goals.append((f"slowest rule group at {big['engines']:,} engines ({worst['group']})",
                  f"< {goal_rule:g} ms", f"median {format_ms(worst['median_ms'])}, max "
                  f"{format_ms(worst['max_ms'])}", (worst["median_ms"] or 0.0) < goal_rule))
    if live and live_big:
        w = max(live_big["rules"], key=lambda g: g["median_ms"] or 0.0)
        goals.append((f"slowest rule group at {live_big['engines']:,} engines after "
                      f"{live['live_minutes']:g} min live ({w['group']})", f"< {goal_rule:g} ms",
                      f"median {format_ms(w['median_ms'])}, max {format_ms(w['max_ms'])}",
                      (w["median_ms"] or 0.0) < goal_rule))
    return lines


ANALYSIS_MARK = "- **Scale at "


def analysis(d: dict[str, Any]) -> list[str]:
    """The page's *Analysis* bullet for a missed scale goal: which groups and queries, and what
    they read (the samples do not depend on the CPU the run got)."""
    big = largest(d)
    rules_big = largest(rules_result(d))
    goal_rule, goal_query = d["goals"]["rule_group_ms"], d["goals"]["query_ms"]
    slow = sorted((g for g in rules_big["rules"] if (g["median_ms"] or 0.0) >= goal_rule),
                  key=lambda g: -(g["median_ms"] or 0.0))
    queries = [q for q in big["queries"] if q["median_ms"] >= goal_query]
    if not slow and not queries:
        return []
    load = rules_big.get("machine_during_measurement", {})
    parts = [f"{ANALYSIS_MARK}{big['engines']:,} engines.**"]
    if slow:
        parts.append(
            f"{len(slow)} of {len(rules_big['rules'])} rule groups took {goal_rule:g} ms or "
            "more: "
            + "; ".join(f"{g['group']} {format_ms(g['median_ms'])} reading {format_count(g.get('samples'))} "
                        f"samples (slowest rule `{g['slowest_rule']}`)" for g in slow)
            + ". Their time follows the samples and series they read, which grow with the "
            "engines (docs/scale.md says what each reads and what is left to lower it).")
    if queries:
        parts.append(f"{len(queries)} of {len(big['queries'])} dashboard queries took "
                     f"{goal_query:g} ms or more.")
    share = load.get("prometheus_cpu_share_during_rules")
    if share is not None:
        parts.append(f"Prometheus ran at nice {load.get('prometheus_nice', '?')} and got "
                     f"{share:.0%} of a core while the rules were measured.")
    return [" ".join(parts)]


def splice(page: str, rec: dict[str, Any]) -> str:
    """`page` (docs/benchmarks.md) with this section and its goal rows replaced or added."""
    goals: list[Goal] = []
    section = "\n".join([f"## {TITLE}", "", *render(rec, goals)])
    pattern = re.compile(rf"^## {re.escape(TITLE)}\n.*?(?=^## )", re.M | re.S)
    if pattern.search(page):
        page = pattern.sub(lambda _: section + "\n", page)
    else:
        page = page.replace("\n## Analysis\n", f"\n{section}\n## Analysis\n", 1)
    head, _, rest = page.partition("\n## Goals\n")
    table, sep, tail = rest.partition("\n\n")
    rows = [r for r in table.split("\n") if not r.startswith(
        ("| slowest rule group at", "| slowest dashboard query at"))]
    rows += [f"| {name} | {goal} | {value} | {_yes(ok)} |" for name, goal, value, ok in goals]
    body = [r for r in rows if r.startswith("| ") and not r.startswith(("| figure", "| ---"))]
    missed = sum(r.endswith("| **missed** |") for r in body)
    summary = (f"{missed} of {len(body)} missed; see *Analysis* at the end for what this run "
               "measured about each." if missed else "Every goal measured is met.")
    tail = re.sub(r"\A(Every goal measured is met\.|\d+ of \d+ missed; see \*Analysis\*[^\n]*)",
                  summary, tail)
    # The Analysis bullet: replaced, added before the next section, or dropped when met.
    tail = re.sub(rf"^{re.escape(ANALYSIS_MARK)}[^\n]*\n", "", tail, flags=re.M)
    notes = analysis(rec["data"])
    if notes:
        tail = re.sub(r"(^## Analysis\n.*?)(\n\n## |\Z)",
                      lambda m: m.group(1).rstrip("\n") + "\n" + "\n".join(notes)
                      + (m.group(2) or "\n"),
                      tail, count=1, flags=re.M | re.S)
    return head + "\n## Goals\n" + "\n".join(rows) + sep + tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--into", type=Path, help="benchmark page to update in place")
    parser.add_argument("--docs", type=Path, help="page with the summary's markers (docs/scale.md)")
    parser.add_argument("--result", type=Path, default=STORED)
    args = parser.parse_args()
    if not (args.into or args.docs):
        parser.error("--into, --docs or both")
    data = json.loads(args.result.read_text())
    rec = {"status": "ok", "data": data, "command": data.get("command"), "stored": True}
    if args.into:
        args.into.write_text(splice(args.into.read_text(), rec))
    if args.docs:
        args.docs.write_text(splice_docs(args.docs.read_text(), data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
