"""What `compare` prints: the identity, every lane, repetition and pair with its denominators,
every gate, and the verdict with its exit code (pure: a string)."""

from __future__ import annotations

from lab.compare.admission import (
    ADMITTED,
    CANNOT_COMPARE,
    MAX_REGRESSION,
    MIN_BENEFIT,
    STORE_DROPS,
    TEAM_RECORDS,
    Comparison,
)
from lab.compare.repetitions import LaneArm
from lab.compare.verdicts import FAILS, NOT_EVALUATED, pct
from lab.evidence.arithmetic import quantile

SIMULATED = ("SIMULATED: the evidence comes from the simulated engine (helios-exporter simulate): "
             "it exercises this gate, it measures nothing about Helios.")


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} s"


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:,g}" if not float(value).is_integer() \
        else f"{int(value):,}"


def _identity(c: Comparison) -> list[str]:
    lines = [f"declared change: {c.change or 'none'}", "",
             "identity (equal in both arms except the declared change; source: the engine's "
             "snapshot, NVML, or probe --declare):"]
    for dim, b, cand, status in c.identity.rows:
        source = b.source if b.source == cand.source else f"{b.source}/{cand.source}"
        shown = b.text if b.text == cand.text else f"{b.text}  ->  {cand.text}"
        lines.append(f"  {dim:<13} {source:<9} {status}: {shown}")
    return [*lines, ""]


def _drops(arm: LaneArm) -> str:
    totals = [arm.total(key) for key in STORE_DROPS]
    return "-" if all(t is None for t in totals) else "/".join(_n(t) for t in totals)


def _blocked(arm: LaneArm) -> str:
    blocked = arm.blocked_tokens
    if blocked is None:
        return "-"
    total = sum(blocked.values())
    if not total:
        return "0"
    top = max(sorted(blocked), key=lambda reason: blocked[reason])
    return f"{_n(total)} ({pct(blocked[top] / total)} {top})"


def _lanes(c: Comparison) -> list[str]:
    header = (f"{'lane':<16} {'role':<9} {'arm':<9} {'reps':>4} {'req/rep':>8} {'requests':>9} "
              f"{'out tok':>9} {'mean':>10} {'spread':>7}  {'p50*':>9} {'p95*':>9}  "
              f"{'dropped f/i/x':>13}  blocked tokens")
    lines = ["lanes (measured passes; latency: the engine's histogram, sum over count):", header,
             "-" * len(header)]
    for row in c.lanes:
        for label, arm in (("baseline", row.baseline), ("candidate", row.candidate)):
            per_rep = "/".join(sorted({f"{r.finished:g}" for r in arm.reps
                                       if r.finished is not None})) or "-"
            spread = "-" if arm.spread is None else pct(arm.spread)
            lines.append(
                f"{row.name if label == 'baseline' else '':<16} "
                f"{row.role if label == 'baseline' else '':<9} {label:<9} {len(arm.reps):>4} "
                f"{per_rep:>8} {_n(arm.total_count):>9} {_n(arm.output_tokens):>9} "
                f"{_s(arm.mean):>10} {spread:>7}  {_s(quantile(0.5, arm.buckets)):>9} "
                f"{_s(quantile(0.95, arm.buckets)):>9}  {_drops(arm):>13}  {_blocked(arm)}")
        if row.change is not None:
            lines.append(f"{'':<27}pooled change {pct(row.change, sign=True)} (shown; the gate "
                         "reads the pairs)")
    return [*lines, "", "* p50/p95 are estimated from the latency histogram's buckets (linear "
            "within a bucket) and do not gate.",
            "spread = (slowest - fastest repetition mean) / pooled mean.",
            "dropped f/i/x: host stores dropped full / dropped ineligible / failed; blocked "
            "tokens: prompt tokens misses left to compute (the largest reason's share); both "
            "summed over the measured passes, - where the engine does not report them.", ""]


def _repetitions(c: Comparison) -> list[str]:
    rows = [(row.name, label, r) for row in c.lanes
            for label, arm in (("baseline", row.baseline), ("candidate", row.candidate))
            for r in arm.reps]
    if not rows:
        return []
    width = max(14, *(len(r.name) for _, _, r in rows))
    header = (f"{'lane':<16} {'arm':<9} {'repetition':<{width}} {'incarnation':<22} "
              f"{'passes':>6} {'sent':>5} {'failed':>6} {'finished':>8} {'out tok':>8} "
              f"{'generated':>9} {'mean':>10}  sequence")
    lines = ["repetitions (measured pass; sent, failed and out tok: the probe's record; finished "
             "and generated: the engine):", header, "-" * len(header)]
    for lane, label, r in rows:
        lines.append(f"{lane:<16} {label:<9} {r.name:<{width}} {(r.generation or '-')[:22]:<22} "
                     f"{len(r.chain):>6} {_n(r.sent):>5} {_n(r.failed):>6} {_n(r.finished):>8} "
                     f"{_n(r.output_tokens):>8} {_n(r.generated):>9} {_s(r.mean):>10}  "
                     f"{(r.sequences[-1] if r.sequences and r.sequences[-1] else 'no record')[:16]}")
    return [*lines, ""]


def _pairs(c: Comparison) -> list[str]:
    rows = [(row, p) for row in c.lanes for p in row.pairs]
    if not rows:
        return []
    header = (f"{'lane':<16} {'role':<9} {'pair':>4} {'baseline':>10} {'candidate':>10} "
              f"{'requests':>9} {'out tok':>13}  result")
    lines = ["pairs (baseline repetition n against candidate repetition n, in the order they "
             "ran):", header, "-" * len(header)]
    for row, p in rows:
        requests = f"{_n(p.base.finished)}/{_n(p.cand.finished)}"
        tokens = f"{_n(p.base.output_tokens)}/{_n(p.cand.output_tokens)}"
        result = p.why or ("-" if p.change is None else pct(p.change, sign=True))
        if p.ok is not None:
            result += ": pass" if p.ok else ": FAIL"
        lines.append(f"{row.name:<16} {row.role:<9} {p.number:>4} {_s(p.base.mean):>10} "
                     f"{_s(p.cand.mean):>10} {requests:>9} {tokens:>13}  {result}")
    return [*lines, ""]


def verdict_line(c: Comparison) -> str:
    low, high = c.thresholds
    exploratory = (f"at --min-benefit {pct(low)} and --max-regression {pct(high)}, not the "
                   f"admission gate's {pct(MIN_BENEFIT)} and {pct(MAX_REGRESSION)}")
    failed = [g.name for g in c.gates if g.status == FAILS]
    unknown = [g.name for g in c.gates if g.status == NOT_EVALUATED]
    if c.exit_code == ADMITTED:
        said = "ADMITTED: every gate holds"
    elif c.exit_code == CANNOT_COMPARE:
        said = "CANNOT COMPARE: the evidence does not make a comparison (nothing is admitted)"
    elif c.exploratory and not failed and not unknown:
        said = f"EXPLORATORY: every gate holds {exploratory}: nothing is admitted"
    else:
        parts = ([f"failed: {', '.join(failed)}"] if failed else []) + (
            [f"not evaluated: {', '.join(unknown)}"] if unknown else [])
        said = ("NOT ADMITTED (exploratory, " + exploratory + "): " if c.exploratory
                else "NOT ADMITTED: ") + "; ".join(parts)
    if c.simulated:
        said += " (simulated evidence)"
    if c.unchecked:
        said += f"; not checked by this gate: {', '.join(c.unchecked)} (no --team-record)"
    else:
        said += "; the team's records of functional acceptance and review are given (above)"
    return f"{said} (exit {c.exit_code})"


def _records(c: Comparison) -> list[str]:
    lines = ["the team's records (hashed, not read: this gate cannot judge them):"]
    for kind, what in TEAM_RECORDS.items():
        path, digest = c.records.get(kind, ("-", "not given"))
        lines.append(f"  {what:<26} {digest}  {path}")
    return [*lines, ""]


def render(c: Comparison, baseline: str, candidate: str) -> str:
    lines = [SIMULATED, ""] if c.simulated else []
    lines += [f"baseline  {baseline}", f"candidate {candidate}"]
    lines += _identity(c) + _lanes(c) + _repetitions(c) + _pairs(c) + _records(c)
    lines.append("gates:")
    lines += [f"  {g.name:<17} {g.status}: {g.detail}" for g in c.gates]
    lines.append("")
    lines += [f"note: {n}" for n in c.notes]
    lines += [f"cannot compare: {r}" for r in c.refusals]
    lines.append(verdict_line(c))
    return "\n".join(lines) + "\n"
