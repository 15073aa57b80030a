"""observer-cost.md from an observer-cost document (pure: a string), and the report
(OBSERVER_COST) that lab/evidence/document.py writes: observer-cost.json, its picture and observer-cost.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lab.evidence.document import Picture, Report
from lab.observer_cost.checks import engine_minus_sidecar
from lab.observer_cost.doc import JSON_FILE, VERDICT_WORDS

MD_FILE = "observer-cost.md"
PICTURE_FILE = "observer-cost.png"
PLOT_MISSING = ("no picture: matplotlib is not installed; install the plot extra "
                "(pip install 'helios-exporter[plot]', which scripts/bootstrap does)")
MARK = {True: "yes", False: "**no**", None: "not evaluated"}
CHECKS = ("switch", "switch_verified", "bracketed", "phase_valid", "failed_requests", "output_length",
          "dropped_requests", "ranks", "incarnation", "clock_anchors")


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} s"


def _pct(value: float | None, sign: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value * 100:+.1f} %" if sign else f"{value * 100:.1f} %"


def _n(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _interval(d: Mapping[str, Any] | None) -> str:
    if d is None:
        return "-"
    return f"{_pct(d['estimate'])} [{_pct(d['low'])}, {_pct(d['high'])}]"


def _rule(columns: int) -> str:
    return "|" + " --- |" * columns


def markdown(doc: Mapping[str, Any], picture: str | None, missing: str | None) -> str:
    title = f"# Observer cost: {doc['name']}" + (" (SIMULATED)" if doc.get("simulated") else "")
    out = [title, ""]
    if doc.get("simulated"):
        out += [f"**SIMULATED evidence**: the engine was the simulator, its trace cost set to "
                f"{(doc.get('simulator_trace_cost') or 0) * 100:g} %. Its histogram records the "
                "latency it models; an observer outside that model shows only at the client.",
                ""]
    corpus = doc["corpus"]
    out += [
        f"- engine `{doc['engine_url']}`, sidecar `{doc['sidecar']}`",
        f"- observer on: `{doc['on']}`; off: `{doc['off']}` (run before every step)",
        f"- fixture `{corpus['path']}`: {corpus['bodies']} bodies (SHA-256 "
        f"`{corpus['sha256'][:16]}`), every output exactly {doc['output_tokens']} tokens; "
        f"{doc['requests_per_repetition']} requests a repetition, {doc['warmup_requests']} to "
        "warm each concurrency",
        f"- order drawn from seed {doc['seed']} and written to `{doc['plan']['file']}` (SHA-256 "
        f"`{doc['plan']['sha256'][:16]}`) before the first request:",
    ]
    for c in doc["concurrencies"]:
        names = [("warm-up" if s["arm"] is None else f"{s['arm']}-{s['number']}")
                 for s in doc["steps"] if s["concurrency"] == c]
        out.append(f"  C{c}: {', '.join(names)}")
    source = "the engine's latency histogram" if doc["latency_source"] == "engine" else \
        "the client's clock"
    out += [f"- judged on {source}; interval {doc['level'] * 100:.0f} % (t on the logs of the "
            "pairs' ratios: each pair's on repetition over its off repetition)",
            f"- the switch verified by `{doc.get('witness') or '(none)'}` after every switch and "
            "every repetition", ""]
    if not doc["complete"]:
        out += [f"**Incomplete**: {doc['stopped']}. Steps not run are listed as such.", ""]
    out += _results(doc)
    if picture:
        out += [f"![observer cost per repetition and the difference with its interval]({picture})",
                ""]
    elif missing:
        out += [f"({missing})", ""]
    for c in doc["concurrencies"]:
        out += _repetitions(doc, c)
    out += _checks(doc) + _clocks(doc) + _limits(doc)
    return "\n".join(out).rstrip() + "\n"


def _results(doc: Mapping[str, Any]) -> list[str]:
    out = ["## Result", "",
           "| concurrency | verdict | on vs off (judged) | engine histogram | client | "
           "throughput (req/s) | repetitions valid |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["results"]:
        reps = [s for s in doc["steps"] if s["concurrency"] == r["concurrency"] and s["arm"]]
        judged = "-" if r["estimate"] is None else _interval(r)
        out.append(f"| C{r['concurrency']} | {VERDICT_WORDS[r['verdict']]} | {judged} | "
                   f"{_interval(r['by_source']['engine'])} | "
                   f"{_interval(r['by_source']['client'])} | {_interval(r['throughput'])} | "
                   f"{sum(s['valid'] for s in reps)} of {len(reps)} |")
    out += ["", "On vs off is the pairs' geometric mean ratio (each pair's on repetition over its "
            "off repetition), minus 1, with its interval in "
            "brackets; throughput is answered requests per second at the client.", ""]
    out += [f"- **C{r['concurrency']}**: {r['sentence']}" for r in doc["results"]]
    return [*out, ""]


def _repetitions(doc: Mapping[str, Any], c: int) -> list[str]:
    out = [f"## C{c}: every step", "",
           "| # | phase | arm | valid | engine mean | p50* | p99* | client mean | p50 | p99 | "
           "req/s | tokens/s |", _rule(12)]
    for s in doc["steps"]:
        if s["concurrency"] != c:
            continue
        f = s["figures"]
        e, cl, t = f["engine"], f["client"], f["throughput"]
        arm = "warm-up" if s["arm"] is None else s["arm"]
        out.append(f"| {s['position']} | `{s['phase']}` | {arm} | "
                   f"{'yes' if s['valid'] else '**no**'} | {_s(e['mean'])} | "
                   f"{_s(e['p50_estimated'])} | {_s(e['p99_estimated'])} | {_s(cl['mean'])} | "
                   f"{_s(cl['p50'])} | {_s(cl['p99'])} | {_n(t['requests_per_second'])} | "
                   f"{_n(t['tokens_per_second'], 0)} |")
    out += ["", "\\* estimated from the histogram's buckets (linear within a bucket).", ""]
    result = next(r for r in doc["results"] if r["concurrency"] == c)
    for arm in ("off", "on"):
        a = result["arms"][arm]
        parts = []
        for src, label in (("engine", "engine"), ("client", "client")):
            sp = a.get(src)
            if sp:
                parts.append(f"{label} mean of {sp['n']} means {_s(sp['mean'])}, sd "
                             f"{_s(sp['sd'])} (cv {_pct(sp['cv'], False)}), spread "
                             f"{_pct(sp['spread'], False)}")
        out.append(f"- {arm}: " + ("; ".join(parts) or "no figures"))
    return [*out, ""]


def _checks(doc: Mapping[str, Any]) -> list[str]:
    out = ["## Checks", "",
           "Every repetition must hold every check (a check not evaluated is not a pass); "
           "warm-ups are checked too, for the record, and decide nothing.", "",
           "| phase | " + " | ".join(CHECKS) + " |", _rule(len(CHECKS) + 1)]
    details = []
    for s in doc["steps"]:
        found = {c["check"]: c for c in s["checks"]}
        out.append(f"| `{s['phase']}` | " + " | ".join(
            MARK[found[name]["ok"]] if name in found else "-" for name in CHECKS) + " |")
        details += [f"- `{s['phase']}` {c['check']}: {c['detail']}"
                    for c in s["checks"] if c["ok"] is not True]
    return [*out, "", *details, *([""] if details else [])]


def _clocks(doc: Mapping[str, Any]) -> list[str]:
    out = ["## Clock anchors", "",
           "The engine's clock minus the sidecar's at each edge (each read against the client's "
           "monotonic clock), and where the engine's clock came from.", "",
           "| phase | at begin | at end | engine clock |", "| --- | --- | --- | --- |"]
    for s in doc["steps"]:
        begin, end = s.get("begin"), s.get("end")
        if begin is None:
            continue
        e = begin.get("engine") or {}
        kind = ("snapshot `clock`" if e.get("clock") else
                "HTTP Date (whole seconds)" if e.get("date") is not None else "none")
        vals = [engine_minus_sidecar(x) if x else None for x in (begin, end)]
        out.append(f"| `{s['phase']}` | " + " | ".join(
            "-" if v is None else f"{v:+.3f} s" for v in vals) + f" | {kind} |")
    return [*out, ""]


def _limits(doc: Mapping[str, Any]) -> list[str]:
    n = doc["repetitions"]
    out = ["## What this does not show", "",
           f"- The interval comes from {n} pairs of repetitions: their spread, not a model of the "
           "machine. A difference that is not resolved bounds the cost by the interval's upper "
           "end; it never shows that observing costs nothing.",
           "- The latencies are whole requests, from the engine's histogram and from the "
           "client's clock. A one-second trace samples part of decode; it does not cover "
           "whole-request latency, so trace samples cannot stand in for these figures.",
           "- The engine's p50 and p99 are estimated from its histogram's buckets; its mean is "
           "exact (sum over count). The client's figures include the network and the client."]
    if doc.get("simulated"):
        out.append("- Simulated: the engine's histogram records the simulator's model, in which "
                   "only its own trace switch costs anything; the client's clock sees the "
                   "process's real work too.")
    return [*out, ""]


def _picture() -> Picture:
    from lab.observer_cost.plot import picture  # matplotlib: the plot extra

    return picture


OBSERVER_COST = Report(JSON_FILE, PICTURE_FILE, MD_FILE, markdown, _picture, PLOT_MISSING)
