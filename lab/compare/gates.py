"""The gates of `compare` that read lanes as a whole: which lanes are gated, the accounting,
the counter evidence, and the check that every gate's declared inputs are there
(lab/compare/inputs.py). Pure functions of the lanes `compare` matched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.compare import inputs, lanes
from lab.compare.matched import Lane
from lab.compare.verdicts import (
    CANNOT,
    FAILS,
    HOLDS,
    NOT_APPLICABLE,
    NOT_EVALUATED,
    Gate,
    pct,
)


def lanes_gate(rows: Sequence[Lane], base: Mapping[str, Any], change: str | None) -> Gate:
    """Every lane present is gated (the roles the command line gave, the rest protected); an
    allocator change needs a small-working-set and a page-heavy long-context protected lane."""
    said = ", ".join(f"{r.name} ({r.role}{'' if r.named else ', not named: protected'})"
                     for r in rows)
    if change != "allocator":
        return Gate("lanes", HOLDS, f"every lane of both arms gated: {said}")
    primary = rows[0].name
    found: dict[str, list[str]] = {lanes.SMALL: [], lanes.LONG: []}
    unknown = []
    for row in rows[1:]:
        kinds, missing = lanes.kinds(base, primary, row.name)
        unknown += missing
        for kind in kinds:
            found[kind].append(row.name)
    lacking = [kind for kind, names in found.items() if not names]
    shown = "; ".join(f"{kind}: {', '.join(names) or 'none'}" for kind, names in found.items())
    rule = (f"(small: at most {lanes.SMALL_BODIES_SHARE:.0%} of {primary}'s distinct bodies, "
            f"prompts no longer; long context: prompts at least "
            f"{lanes.LONG_CONTEXT_FACTOR:g}x as long as {primary}'s)")
    if lacking and unknown:
        return Gate("lanes", NOT_EVALUATED, f"{said}; the lanes' kinds are not known "
                    f"({'; '.join(unknown[:3])} unknown in the baseline) {rule}")
    if lacking:
        return Gate("lanes", FAILS, f"an allocator change needs a {' and a '.join(lacking)} "
                    f"protected lane, the baseline shows {shown} {rule}: {said}")
    return Gate("lanes", HOLDS, f"every lane of both arms gated: {said}; {shown} {rule}")


def accounting_gate(lanes_: Sequence[Lane]) -> Gate:
    reps = [r for row in lanes_ for arm in (row.baseline, row.candidate) for r in arm.reps]
    contradicted = [r.name for r in reps if any("counters contradict" in p for p in r.problems)]
    checked = sum(len(r.chain) for r in reps)
    busy = [n for r in reps for n in r.busy]
    if contradicted:
        return Gate("accounting", CANNOT, f"counters contradict each other in "
                    f"{', '.join(sorted(set(contradicted)))} (see 'cannot compare' below)")
    if not checked:
        return Gate("accounting", NOT_EVALUATED, "no phases to check")
    if busy:
        return Gate("accounting", NOT_EVALUATED, f"requests in flight at an edge of "
                    f"{', '.join(busy[:3])}{' ...' if len(busy) > 3 else ''}: lookups against "
                    "finished requests cannot be checked there")
    return Gate("accounting", HOLDS, f"{checked} phases: hits and misses within lookups, "
                "restored within reused within prompt tokens, lookups equal to finished "
                "requests with nothing in flight at either edge, the engine's generated tokens "
                "equal to those the probe received")


def counter_evidence(row: Lane, change: str | None, share: float) -> Gate:
    """Row pressure with page headroom in a substantive share (compare.MIN_HEADROOM_SHARE) of the
    baseline's row-pressure attempts, in every repetition of the primary lane."""
    if change != "allocator":
        return Gate("counter evidence", NOT_APPLICABLE, "only an allocator change needs row "
                    "pressure with page headroom in the baseline first")
    reps = row.baseline.reps
    attempts = [r.deltas.get("row_pressure_attempts") for r in reps]
    headroom = [r.deltas.get("row_pressure_with_page_headroom") for r in reps]
    if not reps or None in attempts or None in headroom:
        return Gate("counter evidence", NOT_EVALUATED, f"the baseline's primary lane {row.name} "
                    "has no row-pressure counters: row pressure with page headroom is not shown")
    shown = sum(h or 0 for h in headroom)
    total = sum(a or 0 for a in attempts)
    short = [r.name for r, a, h in zip(reps, attempts, headroom, strict=True)
             if not a or (h or 0) < share * a]
    said = (f"baseline {row.name}: {total:,} row-pressure eviction attempts, {shown:,} of them "
            f"({pct(shown / total) if total else '-'}) while at least 25% of the pages were "
            f"free ({len(reps)} repetitions; needed: at least {share:.0%} in each)")
    if short:
        return Gate("counter evidence", FAILS, f"not shown in {', '.join(short)}: {said}")
    return Gate("counter evidence", HOLDS, said)


def _scope(scope: str, lanes_: Sequence[Lane], base: Mapping[str, Any],
           cand: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each arm's phases and passes a gate reads (inputs.GATE_INPUTS' scopes)."""
    out = []
    for label, doc, arm in (("baseline", base, "baseline"), ("candidate", cand, "candidate")):
        if scope == inputs.BASELINE_PRIMARY and label == "candidate":
            continue
        chains = [r.chain if scope != inputs.MEASURED else [r.name]
                  for row in lanes_ for r in getattr(row, arm).reps
                  if scope != inputs.BASELINE_PRIMARY or row.role == "primary"]
        wanted = {n for chain in chains for n in chain}
        out.append((label, {"phases": [p for p in doc.get("phases") or []
                                       if p.get("name") in wanted],
                            "passes": [p for p in doc.get("passes") or []
                                       if p.get("phase") in wanted]}))
    return out


def inputs_known(gate: Gate, lanes_: Sequence[Lane], base: Mapping[str, Any],
                  cand: Mapping[str, Any]) -> Gate:
    """`not evaluated`, naming them, for a gate whose required inputs are missing or null
    (inputs.GATE_INPUTS); the gate as it was otherwise."""
    if gate.name not in inputs.GATE_INPUTS or gate.status in (CANNOT, NOT_APPLICABLE):
        return gate
    if gate.name in {"primary", "protected"}:
        lanes_ = [r for r in lanes_ if r.role == gate.name]
    absent = inputs.missing(_scope(inputs.GATE_INPUTS[gate.name][0], lanes_, base, cand),
                            gate.name)
    if not absent:
        return gate
    more = f" (and {len(absent) - 4} more)" if len(absent) > 4 else ""
    return Gate(gate.name, NOT_EVALUATED, f"inputs missing or null: {'; '.join(absent[:4])}{more}")
