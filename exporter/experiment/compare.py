"""The admission gate over two arms' evidence.json (docs/interface.md section 7; docs/experiments.md).

A lane's repetitions are its valid phases `LANE/1`, `LANE/2`, ...; a repetition's figure is its
mean end-to-end latency (latency histogram deltas, sum over count); an arm's figure for a lane is
the pooled mean of its repetitions (every request weighs the same). Gates: the primary lane must
be faster by at least min-benefit, no protected lane slower by more than max-regression.

Exit 0 when the gates pass, 1 when one fails, 2 when the arms cannot be compared: a lane with
fewer than MIN_REPETITIONS valid repetitions in either arm, repetitions that are not matched (a
different number of requests, other bytes or another order), a repetition that fails the strict
output contract (no probe record of what was sent, a failed request, or other traffic: the engine
finished more or fewer requests than the probe sent), or arms whose pinned identity differs in a
dimension the user did not declare (`--allow-difference`). A failed output is exit 2, not 1: the
latency figures then leave out (or time) failed requests, so the gate has nothing sound to pass
or fail; the seed orders functional acceptance before the performance gate, and exit 2 never
admits. p50 and p95 come from the histogram buckets and are shown beside the means, never gating.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from exporter.experiment.deltas import quantile, sum_buckets

MIN_REPETITIONS: Final = 3
# What must be equal between the two arms unless declared (and within each arm, always).
DIMENSIONS: Final = ("image_digest", "package", "checkpoint", "budget", "geometry")
PASS, FAIL, REFUSED = 0, 1, 2


def identity(phase: Mapping[str, Any]) -> dict[str, str]:
    """The pinned identity of the engine a phase ran on, per dimension (as text)."""
    begin = phase.get("begin") or {}
    ident = begin.get("identity") or {}
    slabs = begin.get("slabs") or {}
    out = {k: str(ident.get(k, "unknown")) for k in ("image_digest", "package", "checkpoint")}
    out["budget"] = f"{begin['budget_bytes']:,} B" if begin.get("budget_bytes") else "unknown"
    out["geometry"] = ", ".join(f"{kind} {s.get('capacity', 0):,} x {s.get('record_bytes', 0):,} B"
                                for kind, s in sorted(slabs.items())) or "unknown"
    return out


@dataclass(frozen=True)
class Rep:
    """One counted repetition with its denominators."""

    name: str
    finished: float  # requests the engine finished (its latency histogram's count)
    mean: float
    sent: int | None = None  # from the probe's record; None: no record
    failed: int | None = None
    sequence: str | None = None


@dataclass
class Arm:
    reps: list[Rep] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # why a LANE/n phase does not count
    unmatched: list[str] = field(default_factory=list)  # why a counted one voids the comparison
    total_sum: float = 0.0
    total_count: float = 0.0
    buckets: list[tuple[float, float]] = field(default_factory=list)

    @property
    def sequences(self) -> set[str]:
        return {r.sequence for r in self.reps if r.sequence}

    @property
    def mean(self) -> float | None:
        return self.total_sum / self.total_count if self.total_count else None

    @property
    def spread(self) -> float | None:
        """(max - min) / mean of the repetition means."""
        means = [r.mean for r in self.reps]
        if len(means) < 2 or not self.mean:
            return None
        return (max(means) - min(means)) / self.mean

    @property
    def stdev(self) -> float | None:
        means = [r.mean for r in self.reps]
        return statistics.stdev(means) if len(means) >= 2 else None


def _output_problem(rep: Rep, allow_unrecorded: bool = False) -> str | None:
    """Why a repetition's requests do not make a matched, strict-output repetition (None: they
    do). The probe's record says what was sent and what failed; without it neither is known,
    which only a declared `--allow-unrecorded` accepts (phases bracketed by hand around another
    load generator, whose own record of failures the user vouches for)."""
    if rep.sent is None or rep.failed is None:
        if allow_unrecorded:
            return None
        return (f"{rep.name}: no probe record, so its sent and failed requests are unknown "
                "(write the evidence with --probe-record, or declare phases bracketed by hand "
                "around another load generator with --allow-unrecorded)")
    if rep.failed:
        return (f"{rep.name}: {rep.failed} of {rep.sent} requests failed (an output failure "
                "voids the repetition; the outputs are in probe.json)")
    if rep.finished != rep.sent:
        return (f"{rep.name}: the engine finished {rep.finished:g} requests, the probe sent "
                f"{rep.sent}: other traffic reached the engine during the phase")
    return None


def lane_arm(doc: Mapping[str, Any], lane: str, allow_unrecorded: bool = False) -> Arm:
    pattern = re.compile(re.escape(lane) + r"/([0-9]+)")
    passes = {p["phase"]: p for p in doc.get("passes") or []}
    arm = Arm()
    latencies = []
    matched = [(int(m.group(1)), p) for p in doc.get("phases") or []
               if (m := pattern.fullmatch(str(p.get("name", ""))))]
    for _, p in sorted(matched, key=lambda x: x[0]):
        name = p["name"]
        latency = (p.get("deltas") or {}).get("e2e_latency_seconds")
        if p.get("state") != "ended":
            arm.skipped.append(f"{name}: still open")
        elif not p.get("valid"):
            arm.skipped.append(f"{name}: invalid ({'; '.join(p.get('invalid_reasons') or [])})")
        elif not latency or not latency.get("count"):
            arm.skipped.append(f"{name}: no finished requests in the engine's latency histogram")
        else:
            count, total = float(latency["count"]), float(latency["sum"])
            recorded = passes.get(name) or {}
            rep = Rep(name, count, total / count, recorded.get("sent"), recorded.get("failed"),
                      recorded.get("sequence_sha256"))
            arm.reps.append(rep)
            arm.total_sum += total
            arm.total_count += count
            latencies.append(latency)
            problem = _output_problem(rep, allow_unrecorded)
            if problem:
                arm.unmatched.append(problem)
    arm.buckets = sum_buckets(latencies)
    return arm


@dataclass
class Lane:
    name: str
    role: str  # primary | protected
    baseline: Arm
    candidate: Arm
    change: float | None = None  # (candidate - baseline) / baseline of the means
    ok: bool | None = None
    why: str = ""


@dataclass
class Comparison:
    exit_code: int = PASS
    lanes: list[Lane] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    identity: dict[str, tuple[str, str]] = field(default_factory=dict)  # dim -> (base, cand)


def _arm_identity(doc: Mapping[str, Any], lanes: Sequence[str], label: str,
                  out: Comparison) -> dict[str, str]:
    seen: dict[str, set[str]] = {d: set() for d in DIMENSIONS}
    for lane in lanes:
        pattern = re.compile(re.escape(lane) + r"/[0-9]+")
        for p in doc.get("phases") or []:
            if pattern.fullmatch(str(p.get("name", ""))) and p.get("valid"):
                for dim, value in identity(p).items():
                    seen[dim].add(value)
    for dim, values in seen.items():
        if len(values) > 1:
            out.refusals.append(f"the {label} arm mixes engines: {dim} is "
                                + " and ".join(sorted(values)) + " (one arm, one engine)")
    return {dim: next(iter(v)) if len(v) == 1 else "mixed" for dim, v in seen.items()}


def compare(baseline: Mapping[str, Any], candidate: Mapping[str, Any], primary: str,
            protected: Sequence[str] = (), min_benefit: float = 0.05,
            max_regression: float = 0.03, allow: Sequence[str] = (),
            allow_unrecorded: bool = False) -> Comparison:
    out = Comparison()
    lanes = [primary, *[p for p in protected if p != primary]]
    base_id = _arm_identity(baseline, lanes, "baseline", out)
    cand_id = _arm_identity(candidate, lanes, "candidate", out)
    for dim in DIMENSIONS:
        out.identity[dim] = (base_id[dim], cand_id[dim])
        differs = base_id[dim] != cand_id[dim]
        if differs and dim not in allow:
            out.refusals.append(
                f"the arms differ in {dim} ({base_id[dim]} vs {cand_id[dim]}), which was not "
                f"declared: compare one change at a time, or declare it with "
                f"--allow-difference {dim}")
        elif not differs and dim in allow:
            out.notes.append(f"--allow-difference {dim} declared, but both arms have "
                             f"{dim} {base_id[dim]}")
    for lane in lanes:
        row = Lane(lane, "primary" if lane == primary else "protected",
                   lane_arm(baseline, lane, allow_unrecorded),
                   lane_arm(candidate, lane, allow_unrecorded))
        unrecorded = [r.name for arm in (row.baseline, row.candidate) for r in arm.reps
                      if r.sent is None]
        if allow_unrecorded and unrecorded:
            out.notes.append(f"lane {lane}: --allow-unrecorded: {', '.join(unrecorded)} have no "
                             "probe record; their failed requests are unknown to this gate and "
                             "the engine's finished count is their only denominator")
        out.lanes.append(row)
        for label, arm in (("baseline", row.baseline), ("candidate", row.candidate)):
            if len(arm.reps) < MIN_REPETITIONS:
                skipped = f" ({'; '.join(arm.skipped)})" if arm.skipped else ""
                out.refusals.append(f"lane {lane}: {len(arm.reps)} valid repetitions in the "
                                    f"{label} arm, {MIN_REPETITIONS} needed{skipped}")
        for label, arm in (("baseline", row.baseline), ("candidate", row.candidate)):
            out.refusals += [f"lane {lane}, {label}: {why}" for why in arm.unmatched]
        counts = {r.finished for arm in (row.baseline, row.candidate) for r in arm.reps}
        if len(counts) > 1:
            out.refusals.append(f"lane {lane}: repetitions are not matched: "
                                + ", ".join(f"{n:g}" for n in sorted(counts))
                                + " requests per repetition")
        sequences = row.baseline.sequences | row.candidate.sequences
        if len(sequences) > 1:
            out.refusals.append(f"lane {lane}: the repetitions sent different bytes or another "
                                "order (the probe's sequence_sha256 differs)")
        b, c = row.baseline.mean, row.candidate.mean
        if b is None or c is None:
            continue
        row.change = (c - b) / b
        if row.role == "primary":
            row.ok = -row.change >= min_benefit
            row.why = (f"benefit {pct(-row.change)} {'>=' if row.ok else '<'} the required "
                       f"{pct(min_benefit)}")
        else:
            row.ok = row.change <= max_regression
            row.why = (f"regression {pct(max(row.change, 0.0))} "
                       f"{'<=' if row.ok else '>'} the allowed {pct(max_regression)}")
        if not row.ok:
            out.failures.append(f"lane {lane} ({row.role}): {row.why}")
        spreads = [s for s in (row.baseline.spread, row.candidate.spread) if s is not None]
        if row.role == "primary" and spreads and abs(row.change) < max(spreads):
            out.notes.append(f"lane {lane}: the change ({pct(row.change, sign=True)}) is smaller "
                             f"than the spread between repetitions ({pct(max(spreads))}): not "
                             "distinguishable from noise")
    out.exit_code = REFUSED if out.refusals else FAIL if out.failures else PASS
    return out


# -- the table --------------------------------------------------------------------------------
def pct(value: float, sign: bool = False) -> str:
    """A fraction as a percentage with one decimal; one that rounds to zero is "0.0%", never
    "-0.0%" or "+0.0%"."""
    if round(value * 100, 1) == 0:
        return "0.0%"
    return f"{value:+.1%}" if sign else f"{value:.1%}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} s"


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _repetitions(c: Comparison) -> list[str]:
    """Every counted repetition with its denominators: what the probe sent and what failed (its
    record), what the engine finished, and which bytes in which order (sequence_sha256)."""
    rows = [(row.name, label, r) for row in c.lanes
            for label, arm in (("baseline", row.baseline), ("candidate", row.candidate))
            for r in arm.reps]
    if not rows:
        return []
    width = max(16, *(len(r.name) for _, _, r in rows))
    header = (f"{'lane':<16} {'arm':<9} {'repetition':<{width}} {'sent':>6} {'failed':>6} "
              f"{'finished':>8} {'mean':>10}  bytes and order (sequence_sha256)")
    lines = ["repetitions (sent and failed: the probe's record; finished: the engine's latency "
             "histogram):", header, "-" * len(header)]
    for lane, label, r in rows:
        lines.append(f"{lane:<16} {label:<9} {r.name:<{width}} {_n(r.sent):>6} "
                     f"{_n(r.failed):>6} {r.finished:>8g} {_s(r.mean):>10}  "
                     f"{(r.sequence or 'no record')[:16]}")
    return [*lines, ""]


def render(c: Comparison, baseline: str, candidate: str) -> str:
    lines = [f"baseline  {baseline}", f"candidate {candidate}", ""]
    lines.append("identity (must be equal unless declared with --allow-difference):")
    for dim, (b, cand) in c.identity.items():
        lines.append(f"  {dim:<13} {'same' if b == cand else 'DIFFERS'}: {b}"
                     + ("" if b == cand else f"  ->  {cand}"))
    lines.append("")
    header = (f"{'lane':<16} {'role':<9} {'arm':<9} {'reps':>4} {'req/rep':>9} {'requests':>9} "
              f"{'mean':>10} {'spread':>7}  {'p50*':>9} {'p95*':>9}  repetition means")
    lines += [header, "-" * len(header)]
    for row in c.lanes:
        for label, arm in (("baseline", row.baseline), ("candidate", row.candidate)):
            per_rep = sorted({f"{r.finished:g}" for r in arm.reps}) or ["-"]
            spread = "-" if arm.spread is None else pct(arm.spread)
            means = " ".join(f"{r.mean:.4f}" for r in arm.reps) or "-"
            lines.append(
                f"{row.name if label == 'baseline' else '':<16} "
                f"{row.role if label == 'baseline' else '':<9} {label:<9} {len(arm.reps):>4} "
                f"{'/'.join(per_rep):>9} {arm.total_count:>9g} {_s(arm.mean):>10} {spread:>7}  "
                f"{_s(quantile(0.5, arm.buckets)):>9} {_s(quantile(0.95, arm.buckets)):>9}  "
                f"{means}")
        if row.change is not None:
            verdict = "pass" if row.ok else "FAIL"
            lines.append(f"{'':<27}change {pct(row.change, sign=True)}: {row.why}: {verdict}")
        for arm_label, arm in (("baseline", row.baseline), ("candidate", row.candidate)):
            for skipped in arm.skipped:
                lines.append(f"{'':<27}not counted ({arm_label}): {skipped}")
    lines += ["", "* p50/p95 are estimated from the latency histogram's buckets (linear within a "
              "bucket) and do not gate; the gate uses the means (sum over count).",
              "spread = (slowest - fastest repetition mean) / pooled mean.", ""]
    lines += _repetitions(c)
    lines += [f"note: {n}" for n in c.notes]
    lines += [f"cannot compare: {r}" for r in c.refusals]
    lines += [f"gate failed: {f}" for f in c.failures]
    result = {PASS: "PASS: every gate holds", FAIL: "FAIL: a gate failed",
              REFUSED: "REFUSED: the arms cannot be compared as they are"}[c.exit_code]
    lines.append(f"{result} (exit {c.exit_code})")
    return "\n".join(lines) + "\n"
