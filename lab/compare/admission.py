"""The admission gate over two arms' evidence.json (docs/interface.md section 7.1;
docs/experiments.md section 4).

Nothing stored is trusted: each arm's phase deltas, validity and generation, and its passes'
sums, are derived again from the raw captures and per-request records
(lab/compare/rederive.py), and a stored summary that disagrees refuses. Every lane
present in either arm is gated (lab/compare/lanes.py): the command line names the
primary lane, every other one is protected. A lane's repetitions are `LANE/1` ... `LANE/R`
(lab/compare/repetitions.py), each on its own fresh incarnation; baseline repetition n is
paired with candidate repetition n, in the order they ran. The gates, every one printed, each
reading the fields lab/compare/inputs.py declares for it (missing or null: not
evaluated):

- identity: the engines are the same in every dimension but the one declared change
  (lab/compare/identity.py); a dimension nobody knows is not evaluated.
- repetitions: equal counts (at least MIN_REPETITIONS), every repetition usable, the same bytes
  in the same order, the same number of requests.
- lanes: every lane gated; an allocator change protects a small working set and a page-heavy
  long context (lab/compare/gates.py).
- accounting: no counter contradicts another (part of each repetition being usable, shown apart).
- strict output: request by request, pair by pair, both arms returned the output length the
  corpus fixed and the same output hash (lab/compare/strict.py).
- counter evidence (an allocator change only): row pressure with page headroom in at least
  MIN_HEADROOM_SHARE of each baseline repetition's row-pressure attempts (primary lane).
- primary: every pair of the primary lane at least min-benefit faster (mean end-to-end latency
  of the engine's histogram, sum over count); protected: no pair of a protected lane more than
  max-regression slower. Pairs, not pooled means: a benefit must hold in every matched pair, so
  that one lucky repetition cannot carry it, and the pooled figure is shown beside them.
- semantic: the engine team's verdict on the outputs (lab/compare/semantic.py).

Exit 0 (admitted): every gate holds at the admission gate's thresholds (MIN_BENEFIT,
MAX_REGRESSION); other thresholds are exploratory and never admit. 1 (not admitted): a gate
failed or was not evaluated, or the thresholds were not the gate's. 2 (cannot compare): the
evidence itself does not make a comparison (an unusable file, a stored summary that disagrees
with its captures, repetitions that are not matched or not usable, a lane in one arm only,
engines that differ in more than the declared change, a budget or geometry change). The verdict
says what it did not check (TEAM_RECORDS) unless the team's records are given. p50 and p95 come
from the histogram buckets and never gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from lab.compare import identity
from lab.compare import lanes as lane_names
from lab.compare.gates import accounting_gate, counter_evidence, inputs_known, lanes_gate
from lab.compare.matched import Lane, Pair
from lab.compare.rederive import rederive
from lab.compare.repetitions import lane_arm
from lab.compare.strict import strict_output
from lab.compare.verdicts import (
    CANNOT,
    FAILS,
    HOLDS,
    NOT_EVALUATED,
    Gate,
    pct,
)
from lab.evidence import doc as evidence

MIN_REPETITIONS: Final = 3
ADMITTED, NOT_ADMITTED, CANNOT_COMPARE = 0, 1, 2
PASS, FAIL, REFUSED = ADMITTED, NOT_ADMITTED, CANNOT_COMPARE  # the v2 names
# The admission gate's thresholds (the allocator plan's); any other pair runs as exploratory, never admits.
MIN_BENEFIT: Final = 0.05
MAX_REGRESSION: Final = 0.03
# Counter evidence: in every baseline repetition of the primary lane, at least this share of the
# row-pressure eviction attempts came while at least 25 % of the pages were free.
MIN_HEADROOM_SHARE: Final = 0.5
# What this gate cannot check: the engine team's records of them, given with --team-record.
TEAM_RECORDS: Final = {"functional-acceptance": "functional acceptance",
                       "allocation-safety": "allocation-safety review",
                       "restore-review": "numerical restore review"}
# (v3) the deltas of stores not made; a candidate showing the first or the last where the
# baseline did not is noted (dropped_ineligible follows from the corpus: shown only)
STORE_DROPS: Final = ("stores_dropped_full", "stores_dropped_ineligible", "stores_failed")
DROPS: Final = (("stores_dropped_full", "dropped full"), ("stores_failed", "failed"))
GATES: Final = ("identity", "repetitions", "lanes", "accounting", "strict output",
                "counter evidence", "primary", "protected", "semantic")


@dataclass
class Comparison:
    exit_code: int = ADMITTED
    change: str | None = None
    lanes: list[Lane] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    identity: identity.Judged = field(default_factory=identity.Judged)
    simulated: bool = False
    thresholds: tuple[float, float] = (MIN_BENEFIT, MAX_REGRESSION)
    records: dict[str, tuple[str, str]] = field(default_factory=dict)  # kind: (path, sha256)

    @property
    def failures(self) -> list[str]:
        return [f"{g.name}: {g.detail}" for g in self.gates if g.status == FAILS]

    @property
    def exploratory(self) -> bool:
        return self.thresholds != (MIN_BENEFIT, MAX_REGRESSION)

    @property
    def unchecked(self) -> list[str]:
        """What the gate did not check, for want of the team's records of it."""
        return [what for kind, what in TEAM_RECORDS.items() if kind not in self.records]


def is_simulated(doc: Mapping[str, Any]) -> bool:
    """Whether the engine said it is the simulator: in a captured identity (identity.engine),
    in a probe's answers (its system_fingerprint), or in the file's flag (which can only add
    the label: the captures say it whatever the flag says)."""
    return evidence.is_simulated(doc.get("passes") or [], doc.get("phases") or []) or \
        doc.get("simulated") is True


def compare(baseline: Mapping[str, Any], candidate: Mapping[str, Any], primary: str,
            protected: Sequence[str] = (), min_benefit: float = MIN_BENEFIT,
            max_regression: float = MAX_REGRESSION, change: str | None = None,
            new_build: bool = False, allow_unrecorded: bool = False,
            semantic: tuple[str, str] | None = None,
            records: Mapping[str, tuple[str, str]] | None = None) -> Comparison:
    """`semantic`: the semantic gate's (status, detail), evaluated by the caller (it needs the
    files); None when none was supplied. `records`: the team's records (kind: (path, sha256))."""
    base, refused = rederive(baseline, "baseline")
    cand, refused_too = rederive(candidate, "candidate")
    out = Comparison(change=change, simulated=is_simulated(base) or is_simulated(cand),
                     thresholds=(min_benefit, max_regression), records=dict(records or {}))
    out.refusals += refused + refused_too
    found = {"baseline": lane_names.names(base), "candidate": lane_names.names(cand)}
    named = [primary, *protected]
    for name in dict.fromkeys([*named, *found["baseline"], *found["candidate"]]):
        row = Lane(name, "primary" if name == primary else "protected",
                   lane_arm(base, name, allow_unrecorded), lane_arm(cand, name, allow_unrecorded),
                   named=name in named)
        only = [label for label in found if name in found[label]]
        if len(only) == 1:
            other = "candidate" if only[0] == "baseline" else "baseline"
            out.refusals.append(f"lane {name} is in the {only[0]} arm only (no phase {name}/r "
                                f"in the {other} arm): every lane present in either arm is "
                                "gated")
            row.refused = True
        elif not only:
            out.refusals.append(f"lane {name} (named on the command line) is in neither arm")
            row.refused = True
        else:
            _match(row, out)
        out.lanes.append(row)
    for label, doc in (("baseline", base), ("candidate", cand)):
        if stray := lane_names.outside(doc):
            out.notes.append(f"the {label} arm's phases {', '.join(stray[:5])} belong to no lane "
                             "(LANE/r, LANE/r/PASS): not read")
    out.gates.append(_identity_gate(out, change, new_build))
    refused_lanes = [r for r in out.lanes if r.refused]
    out.gates.append(Gate("repetitions", CANNOT, "see 'cannot compare' below") if refused_lanes
                     else Gate("repetitions", HOLDS, _repetitions_held(out.lanes)))
    out.gates.append(lanes_gate(out.lanes, base, change))
    out.gates.append(accounting_gate(out.lanes))
    comparable = not out.refusals
    strict = (strict_output(out.lanes, change) if comparable else
              Gate("strict output", NOT_EVALUATED, "the arms cannot be compared"))
    out.gates += [strict, counter_evidence(out.lanes[0], change, MIN_HEADROOM_SHARE)]
    outputs_differ = strict.status == FAILS
    for role in ("primary", "protected"):
        out.gates.append(_performance(out.lanes, role, min_benefit, max_regression, comparable,
                                      outputs_differ))
    status, detail = semantic or (NOT_EVALUATED, "no --semantic-command or --semantic-verdict "
                                  "given: the engine team's check that the outputs are right")
    out.gates.append(Gate("semantic", status, detail))
    out.gates = [inputs_known(g, out.lanes, base, cand) for g in out.gates]
    for row in out.lanes:
        spreads = [s for s in (row.baseline.spread, row.candidate.spread) if s is not None]
        if row.role == "primary" and row.change is not None and spreads and \
                abs(row.change) < max(spreads):
            out.notes.append(f"lane {row.name}: the pooled change ({pct(row.change, sign=True)}) "
                             f"is smaller than the spread between repetitions "
                             f"({pct(max(spreads))})")
    out.notes += _drop_notes(out.lanes)
    if out.refusals:
        out.exit_code = CANNOT_COMPARE
    elif any(g.status in (FAILS, NOT_EVALUATED, CANNOT) for g in out.gates) or out.exploratory:
        out.exit_code = NOT_ADMITTED
    return out


def _drop_notes(lanes: Sequence[Lane]) -> list[str]:
    """Notes, not a gate: a lane whose candidate dropped stores (dropped full, or failed) where
    its baseline did not, summed over the measured passes; and where either arm does not say."""
    out, unknown = [], []
    for row in lanes:
        new = []
        for key, label in DROPS:
            b, c = row.baseline.total(key), row.candidate.total(key)
            if b is None or c is None:
                unknown.append(row.name)
                break
            if c and not b:
                new.append(f"{label} 0 -> {c:,g}")
        if new:
            out.append(f"lane {row.name}: the candidate dropped stores where the baseline did "
                       f"not ({'; '.join(new)}, measured passes summed): it kept less in the host "
                       "tier")
    if unknown:
        out.append(f"store outcomes unknown in lane {', '.join(dict.fromkeys(unknown))} (an "
                   "arm's engine snapshot has no host.store_outcomes, schema 1): whether the "
                   "candidate drops stores the baseline kept is not known")
    return out


def _match(row: Lane, out: Comparison) -> None:
    """Refusals for a lane whose repetitions do not make matched pairs; the pairs otherwise."""
    before = len(out.refusals)
    for label, arm in (("baseline", row.baseline), ("candidate", row.candidate)):
        out.refusals += [f"lane {row.name}, {label}: {why}" for why in arm.problems]
        out.refusals += [f"lane {row.name}, {label}: repetition {r.name} {why}"
                         for r in arm.reps for why in r.problems]
    nb, nc = len(row.baseline.reps), len(row.candidate.reps)
    if nb != nc:
        out.refusals.append(f"lane {row.name}: {nb} repetitions in the baseline arm, {nc} in the "
                            "candidate arm: repetitions are matched one to one")
    elif nb < MIN_REPETITIONS:
        out.refusals.append(f"lane {row.name}: {nb} repetitions in each arm, {MIN_REPETITIONS} "
                            f"needed (phases {row.name}/1 ... {row.name}/{MIN_REPETITIONS})")
    reps = row.baseline.reps + row.candidate.reps
    shapes = {len(r.chain) for r in reps}
    if len(shapes) > 1:
        out.refusals.append(f"lane {row.name}: the repetitions ran different passes (" + ", ".join(
            f"{r.name}: {len(r.chain)}" for r in reps) + ")")
    sequences = {r.sequences for r in reps if r.recorded}
    if len(sequences) > 1:
        out.refusals.append(f"lane {row.name}: the repetitions sent different bytes or another "
                            "order (the probe's sequence_sha256 differs)")
    counts = {r.finished for r in reps if r.finished is not None}
    if len(counts) > 1:
        out.refusals.append(f"lane {row.name}: repetitions are not matched: "
                            + ", ".join(f"{n:g}" for n in sorted(counts))
                            + " requests per repetition")
    row.refused = len(out.refusals) > before
    b, c = row.baseline.mean, row.candidate.mean
    if b and c is not None:
        row.change = (c - b) / b
    if nb == nc:
        row.pairs = [Pair(i, x, y) for i, (x, y) in
                     enumerate(zip(row.baseline.reps, row.candidate.reps, strict=True), 1)]
        for p in row.pairs:
            if p.base.mean and p.cand.mean is not None:
                p.change = (p.cand.mean - p.base.mean) / p.base.mean


def _identity_gate(out: Comparison, change: str | None, new_build: bool) -> Gate:
    refusals: list[str] = []
    per_arm = []
    for label, arm in (("baseline", "baseline"), ("candidate", "candidate")):
        idents = [i for row in out.lanes for r in getattr(row, arm).reps for i in r.identities]
        per_arm.append(identity.of_arm(idents, label, refusals))
    judged = identity.judge(per_arm[0], per_arm[1], change, new_build)
    out.identity = judged
    refusals += judged.refusals
    out.refusals = refusals + out.refusals
    if refusals:
        return Gate("identity", CANNOT, "see 'cannot compare' below")
    if judged.unknown:
        return Gate("identity", NOT_EVALUATED, f"{', '.join(judged.unknown)} unknown in an arm "
                    "(not in the snapshot, not read by NVML, not declared with probe --declare): "
                    "nobody checked that it was held fixed")
    if change is None:
        return Gate("identity", FAILS, "no change declared: the arms are one configuration (an "
                    "A/A comparison shows the noise; it admits nothing)")
    moved = ", ".join(judged.differs)
    return Gate("identity", HOLDS, f"one declared change ({change}; differs: {moved}); every "
                "other dimension equal")


def _repetitions_held(lanes: Sequence[Lane]) -> str:
    parts = [f"{r.name} {len(r.baseline.reps)} x {len(r.baseline.reps[0].chain)} passes"
             for r in lanes if r.baseline.reps]
    return ("matched one to one, each repetition on its own fresh incarnation with nothing sent "
            "but the probe's bodies, in the same order in both arms: " + ", ".join(parts))


def _performance(lanes: Sequence[Lane], role: str, min_benefit: float, max_regression: float,
                 comparable: bool, outputs_differ: bool) -> Gate:
    rows = [r for r in lanes if r.role == role]
    if not rows:
        # The allocator plan protects a small working set and a page-heavy long context: without
        # one, nothing shows that the change does not regress what it must not.
        return Gate(role, NOT_EVALUATED, "no protected lane: the arms hold no lane but the "
                    "primary, so nothing shows the change leaves the lanes it must not slow down "
                    "(an allocator change protects a small working set and a page-heavy long context)")
    if not comparable:
        return Gate(role, NOT_EVALUATED, "the arms cannot be compared")
    if outputs_differ:
        return Gate(role, NOT_EVALUATED, "the outputs differ: latencies of other outputs do not "
                    "compare")
    held, failed = [], []
    for row in rows:
        for p in row.pairs:
            if p.change is None:
                return Gate(role, NOT_EVALUATED, f"{row.name}: pair {p.number} has no mean")
            if role == "primary":
                p.ok = -p.change >= min_benefit
                p.why = (f"{pct(p.change, sign=True)}: a regression, not a benefit"
                         if round(p.change * 100, 1) > 0 else
                         f"benefit {pct(-p.change)} {'>=' if p.ok else '<'} {pct(min_benefit)}")
            else:
                p.ok = p.change <= max_regression
                p.why = (f"{pct(p.change, sign=True)}: "
                         + (f"within the allowed {pct(max_regression)}" if p.ok else
                            f"more than the allowed {pct(max_regression)} slower"))
            if not p.ok:
                failed.append(f"{row.name}: pair {p.number}: {p.why}")
        changes = ", ".join(pct(p.change or 0.0, sign=True) for p in row.pairs)
        pooled = "-" if row.change is None else pct(row.change, sign=True)
        held.append(f"{row.name}: {changes} (pooled {pooled})")
    rule = (f"every matched pair at least {pct(min_benefit)} faster" if role == "primary" else
            f"no matched pair more than {pct(max_regression)} slower")
    if failed:
        return Gate(role, FAILS, f"{'; '.join(failed)}; {rule}, pooled: " + "; ".join(held))
    return Gate(role, HOLDS, f"{rule}: " + "; ".join(held))
