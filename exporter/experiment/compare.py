"""The admission gate over two arms' evidence.json (docs/interface.md section 7; docs/experiments.md).

A lane's repetitions are its valid phases `LANE/1`, `LANE/2`, ...; a repetition's figure is its
mean end-to-end latency (latency histogram deltas, sum over count); an arm's figure for a lane is
the pooled mean of its repetitions (every request weighs the same). Gates: the primary lane must
be faster by at least min-benefit, no protected lane slower by more than max-regression.

Exit 0 when the gates pass, 1 when one fails, 2 when the arms cannot be compared: a lane with
fewer than MIN_REPETITIONS valid repetitions in either arm, repetitions that are not matched (a
different number of requests, or other bytes or order where the probe recorded them), or arms
whose pinned identity differs in a dimension the user did not declare (`--allow-difference`).
p50 and p95 come from the histogram buckets and are shown beside the means, never gating.
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


@dataclass
class Arm:
    reps: list[tuple[str, float, float]] = field(default_factory=list)  # name, requests, mean
    skipped: list[str] = field(default_factory=list)  # why a LANE/n phase does not count
    total_sum: float = 0.0
    total_count: float = 0.0
    buckets: list[tuple[float, float]] = field(default_factory=list)
    sequences: set[str] = field(default_factory=set)

    @property
    def mean(self) -> float | None:
        return self.total_sum / self.total_count if self.total_count else None

    @property
    def spread(self) -> float | None:
        """(max - min) / mean of the repetition means."""
        means = [m for _, _, m in self.reps]
        if len(means) < 2 or not self.mean:
            return None
        return (max(means) - min(means)) / self.mean

    @property
    def stdev(self) -> float | None:
        means = [m for _, _, m in self.reps]
        return statistics.stdev(means) if len(means) >= 2 else None


def lane_arm(doc: Mapping[str, Any], lane: str) -> Arm:
    pattern = re.compile(re.escape(lane) + r"/([0-9]+)")
    sequences = {p["phase"]: p.get("sequence_sha256") for p in doc.get("passes") or []}
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
            arm.reps.append((name, count, total / count))
            arm.total_sum += total
            arm.total_count += count
            latencies.append(latency)
            if sequences.get(name):
                arm.sequences.add(str(sequences[name]))
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
            max_regression: float = 0.03, allow: Sequence[str] = ()) -> Comparison:
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
                   lane_arm(baseline, lane), lane_arm(candidate, lane))
        out.lanes.append(row)
        for label, arm in (("baseline", row.baseline), ("candidate", row.candidate)):
            if len(arm.reps) < MIN_REPETITIONS:
                skipped = f" ({'; '.join(arm.skipped)})" if arm.skipped else ""
                out.refusals.append(f"lane {lane}: {len(arm.reps)} valid repetitions in the "
                                    f"{label} arm, {MIN_REPETITIONS} needed{skipped}")
        counts = {c for arm in (row.baseline, row.candidate) for _, c, _ in arm.reps}
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
            row.why = (f"benefit {-row.change:.1%} {'>=' if row.ok else '<'} the required "
                       f"{min_benefit:.1%}")
        else:
            row.ok = row.change <= max_regression
            row.why = (f"regression {max(row.change, 0.0):.1%} "
                       f"{'<=' if row.ok else '>'} the allowed {max_regression:.1%}")
        if not row.ok:
            out.failures.append(f"lane {lane} ({row.role}): {row.why}")
        spreads = [s for s in (row.baseline.spread, row.candidate.spread) if s is not None]
        if row.role == "primary" and spreads and abs(row.change) < max(spreads):
            out.notes.append(f"lane {lane}: the change ({row.change:+.1%}) is smaller than the "
                             f"spread between repetitions ({max(spreads):.1%}): not "
                             "distinguishable from noise")
    out.exit_code = REFUSED if out.refusals else FAIL if out.failures else PASS
    return out


# -- the table --------------------------------------------------------------------------------
def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} s"


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
            per_rep = sorted({f"{n:g}" for _, n, _ in arm.reps}) or ["-"]
            spread = "-" if arm.spread is None else f"{arm.spread:.1%}"
            means = " ".join(f"{m:.4f}" for _, _, m in arm.reps) or "-"
            lines.append(
                f"{row.name if label == 'baseline' else '':<16} "
                f"{row.role if label == 'baseline' else '':<9} {label:<9} {len(arm.reps):>4} "
                f"{'/'.join(per_rep):>9} {arm.total_count:>9g} {_s(arm.mean):>10} {spread:>7}  "
                f"{_s(quantile(0.5, arm.buckets)):>9} {_s(quantile(0.95, arm.buckets)):>9}  "
                f"{means}")
        if row.change is not None:
            verdict = "pass" if row.ok else "FAIL"
            lines.append(f"{'':<27}change {row.change:+.1%}: {row.why}: {verdict}")
        for arm_label, arm in (("baseline", row.baseline), ("candidate", row.candidate)):
            for skipped in arm.skipped:
                lines.append(f"{'':<27}not counted ({arm_label}): {skipped}")
    lines += ["", "* p50/p95 are estimated from the latency histogram's buckets (linear within a "
              "bucket) and do not gate; the gate uses the means (sum over count).",
              "spread = (slowest - fastest repetition mean) / pooled mean.", ""]
    lines += [f"note: {n}" for n in c.notes]
    lines += [f"cannot compare: {r}" for r in c.refusals]
    lines += [f"gate failed: {f}" for f in c.failures]
    result = {PASS: "PASS: every gate holds", FAIL: "FAIL: a gate failed",
              REFUSED: "REFUSED: the arms cannot be compared as they are"}[c.exit_code]
    lines.append(f"{result} (exit {c.exit_code})")
    return "\n".join(lines) + "\n"
