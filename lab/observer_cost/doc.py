"""observer-cost.json: every step as recorded, its checks and figures, and one result per
concurrency. Pure: `build()` takes the records the run kept.

A result concludes only when every repetition at its concurrency is valid; otherwise its
`estimate`, `low` and `high` are null, `verdict` is `cannot_conclude` and `invalid` names each
invalid repetition with the checks it failed. No repetition is ever left out of the figures shown.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from lab.evidence.arithmetic import quantile
from lab.observer_cost.checks import checks, failing, reference, valid
from lab.observer_cost.stats import LEVEL, Difference, Spread, difference, percentile

FORMAT_VERSION = 1
JSON_FILE = "observer-cost.json"
SOURCES = ("engine", "client")
VERDICTS = ("cost_resolved", "faster_resolved", "not_resolved", "cannot_conclude")
VERDICT_WORDS = {"cost_resolved": "cost resolved", "faster_resolved": "on faster (suspect)",
                 "not_resolved": "not resolved", "cannot_conclude": "cannot conclude"}


def figures(step: Mapping[str, Any]) -> dict[str, Any]:
    """A step's latency (engine histogram and client) and throughput; None where unknown."""
    load = step.get("load") or {}
    requests = load.get("requests") or []
    ok = [r for r in requests if r.get("ok")]
    seconds = [r["seconds"] for r in ok]
    wall = load.get("wall_seconds")
    tokens = sum(r.get("completion_tokens") or 0 for r in ok)
    phase = (step.get("end") or {}).get("phase") or {}
    # A phase the sidecar found invalid (across a restart) has no engine figures to show.
    deltas = phase.get("deltas") if phase.get("valid") is True else None
    hist = deltas.get("e2e_latency_seconds") if isinstance(deltas, dict) else None
    hist = hist if isinstance(hist, dict) else {}
    buckets = _buckets(hist.get("buckets"))
    count, total = _number(hist.get("count")), _number(hist.get("sum"))
    count = count if count and count > 0 else None
    return {
        "sent": len(requests), "answered": len(ok),
        "engine": {"requests": count,
                   "mean": total / count if count and total is not None and total >= 0
                   else None,
                   # Estimated from the histogram's buckets (linear within a bucket).
                   "p50_estimated": quantile(0.5, buckets) if count and buckets else None,
                   "p99_estimated": quantile(0.99, buckets) if count and buckets else None},
        "client": {"requests": len(seconds),
                   "mean": statistics.fmean(seconds) if seconds else None,
                   "p50": percentile(seconds, 0.5), "p99": percentile(seconds, 0.99)},
        "throughput": {"requests_per_second": len(ok) / wall if wall else None,
                       "tokens_per_second": tokens / wall if wall else None,
                       "wall_seconds": wall},
    }


def _number(value: Any) -> float | None:
    """A finite number from the sidecar's answer, else None (never a crash, never a guess)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _buckets(value: Any) -> list[tuple[float, float]]:
    """The histogram's cumulative buckets as (le, count); none when any is malformed (the
    estimated percentiles are then left out: they are shown, never judged)."""
    out = []
    try:
        for le, n in value or []:
            out.append((float(le), float(n)))
    except (TypeError, ValueError):
        return []
    return out


def _spread(values: Sequence[float | None]) -> dict[str, Any] | None:
    known = [v for v in values if v is not None]
    if not known or len(known) != len(values):
        return None
    s = Spread.of(known)
    return {"n": s.n, "mean": s.mean, "sd": s.sd, "cv": s.cv, "spread": s.spread}


def _difference(d: Difference | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {"estimate": d.estimate, "low": d.low, "high": d.high, "resolved": d.resolved,
            "level": d.level, "df": d.df, "t": d.t}


def _pct(value: float) -> str:
    return f"{value * 100:+.1f} %"


def sentence(verdict: str, d: Mapping[str, Any] | None, spread: float | None,
             invalid: Sequence[Mapping[str, Any]], why: str | None = None) -> str:
    """What a result says, in words that never read a difference inside the spread as no cost."""
    if verdict == "cannot_conclude":
        if invalid:
            names = ", ".join(i["phase"] for i in invalid)
            also = f"; {why}" if why else ""
            return (f"Cannot conclude: {len(invalid)} repetition(s) are invalid ({names}){also}. "
                    "They are kept and shown, and no difference is computed; remove the cause and "
                    "run every repetition again.")
        return f"Cannot conclude: {why or 'the repetitions do not allow a difference'}."
    assert d is not None
    interval = (f"{_pct(d['estimate'])}, {d['level'] * 100:.0f} % interval {_pct(d['low'])} to "
                f"{_pct(d['high'])}")
    if verdict == "cost_resolved":
        return (f"With the observer on, requests took longer ({interval}): a cost is resolved; "
                "it lies within that interval.")
    if verdict == "faster_resolved":
        return (f"With the observer on, requests were faster ({interval}). An observer does not "
                "speed an engine up: suspect drift or another difference between the arms, and "
                "repeat before reading anything into it.")
    within = f" (the repetition means spread by up to {spread * 100:.1f} %)" if spread else ""
    return (f"Not resolved: the difference ({interval}) includes 0{within}. This does not show "
            f"that observing costs nothing: at this spread the cost may be as large as "
            f"{_pct(d['high'])}; more repetitions or a quieter machine narrow the interval.")


def result(concurrency: int, steps: Sequence[Mapping[str, Any]], source: str,
           level: float = LEVEL) -> dict[str, Any]:
    """The result at one concurrency, from its repetitions (each with `checks` and `figures`)."""
    reps = [s for s in steps if s["concurrency"] == concurrency and s["arm"] is not None]
    # A repetition the run never reached is not run, not invalid: nothing of it was measured.
    not_run = [s["phase"] for s in reps if s.get("switch") is None]
    invalid = [{"phase": s["phase"], "failing": failing(s["checks"])}
               for s in reps if not s["valid"] and s.get("switch") is not None]
    arms: dict[str, Any] = {}
    for arm in ("off", "on"):
        mine = [s for s in reps if s["arm"] == arm]
        arms[arm] = {"repetitions": [s["phase"] for s in mine],
                     **{src: _spread([s["figures"][src]["mean"] for s in mine])
                        for src in SOURCES},
                     "throughput": _spread([s["figures"]["throughput"]["requests_per_second"]
                                            for s in mine])}
    by_source: dict[str, Any] = {}
    for src in SOURCES:
        by_source[src] = _difference(_diff(reps, (src, "mean"), level))
    throughput = _difference(_diff(reps, ("throughput", "requests_per_second"), level))
    primary = by_source.get(source)
    why = None
    if invalid or not_run:
        verdict = "cannot_conclude"
        if not_run:
            why = (f"{len(not_run)} repetition(s) were not run ({', '.join(not_run)}): the run "
                   "stopped before them")
    elif primary is None:
        verdict = "cannot_conclude"
        why = (f"no {source} latency for every repetition, fewer than 2 pairs, or pairs whose "
               "ratios are all equal (no spread to build an interval from)"
               + (" (the engine's latency histogram is missing: --latency-source client times "
                  "requests at the client)" if source == "engine" else ""))
    elif primary["resolved"]:
        verdict = "cost_resolved" if primary["low"] > 0 else "faster_resolved"
    else:
        verdict = "not_resolved"
    spreads = [arms[a][source]["spread"] for a in ("off", "on") if arms[a].get(source)]
    shown = primary if verdict != "cannot_conclude" else None
    return {
        "concurrency": concurrency, "source": source,
        "estimate": shown["estimate"] if shown else None,
        "low": shown["low"] if shown else None,
        "high": shown["high"] if shown else None,
        "resolved": bool(shown and shown["resolved"]),
        "verdict": verdict,
        "sentence": sentence(verdict, shown, max(spreads) if spreads else None, invalid, why),
        "by_source": by_source if not (invalid or not_run) else dict.fromkeys(SOURCES),
        "throughput": throughput if not (invalid or not_run) else None,
        "arms": arms,
        "invalid": invalid,
        "not_run": not_run,
    }


def _diff(reps: Sequence[Mapping[str, Any]], field: tuple[str, str],
          level: float) -> Difference | None:
    """The difference of one figure (`figures[a][b]`) within each pair (a pair is the off and on
    repetitions of one number); None where a figure is unknown or a pair incomplete."""
    pairs: dict[int, dict[str, float]] = {}
    for s in reps:
        value = s["figures"][field[0]][field[1]]
        if value is None:
            return None
        pairs.setdefault(s["number"], {})[s["arm"]] = value
    if any(len(p) != 2 for p in pairs.values()):
        return None
    numbers = sorted(pairs)
    return difference([pairs[n]["on"] for n in numbers], [pairs[n]["off"] for n in numbers],
                      level)


def judge(steps: Sequence[Mapping[str, Any]], output_tokens: int, ranks: int | None,
          tolerance: float) -> list[dict[str, Any]]:
    """The steps with their checks, validity and figures."""
    ref = reference(steps)
    out = []
    for step in steps:
        found = checks(step, ref, output_tokens, ranks, tolerance)
        out.append({**step, "checks": found, "valid": valid(found), "figures": figures(step)})
    return out


def build(about: Mapping[str, Any], steps: Sequence[Mapping[str, Any]],
          concurrencies: Sequence[int], output_tokens: int, *, source: str = "engine",
          ranks: int | None = None, tolerance: float = 0.25, complete: bool = True,
          stopped: str | None = None) -> dict[str, Any]:
    """The whole document. `about`: what the run was told (engine, sidecar, corpus, plan...)."""
    judged = judge(steps, output_tokens, ranks, tolerance)
    engines = [(s.get(e) or {}).get("engine") or {} for s in judged for e in ("begin", "end")]
    traces = [e["trace"] for e in engines if e.get("trace") is not None]
    return {
        "format": FORMAT_VERSION, "generated_at": time.time(), **about,
        "output_tokens": output_tokens, "latency_source": source, "level": LEVEL,
        "expected_ranks": ranks, "clock_tolerance_seconds": tolerance,
        "simulated": any(e.get("simulated") for e in engines),
        "simulator_trace_cost": traces[0]["cost"] if traces else None,
        "complete": complete, "stopped": stopped,
        "conclusive": complete and all(s["valid"] for s in judged if s["arm"] is not None),
        "results": [result(c, judged, source) for c in concurrencies],
        "steps": judged,
    }


def what_ran(doc: Mapping[str, Any]) -> str:
    """The engine in one phrase: simulated ones say so, with the cost they were set to."""
    if not doc.get("simulated"):
        return "engine"
    cost = doc.get("simulator_trace_cost")
    return ("simulated engine" + (f" (trace cost set to {cost * 100:g} %)" if cost else
                                  " (trace cost 0)"))
