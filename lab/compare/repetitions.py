"""One arm's repetitions of one lane, as `compare` reads them from evidence.json.

Repetition r of lane L is the phase `L/r` (the measured pass) with the passes that ran before it
on the same incarnation, `L/r/<order>-<n>` (its prime): the probe runs each repetition on its own
fresh incarnation (`probe --repetitions R --fresh-command CMD`). A repetition is usable only when
every one of its phases ended and is valid, its counters agree with each other, the engine
counted exactly the requests the probe sent (no other client's traffic in a pass, none between
its passes), none of them failed, its first pass began on a fresh incarnation, and no other
repetition of the arm ran on that incarnation. A repetition that is not usable is never dropped:
`compare` refuses and names it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.compare import identity
from lab.evidence.arithmetic import accounting, gap, lookups_before, sum_buckets
from lab.evidence.doc import foreign_traffic

NO_RECORD = ("has no probe record: its sent and failed requests and outputs are unknown (write "
             "the evidence with --probe-record, or declare phases bracketed by hand with "
             "--allow-unrecorded)")


@dataclass
class Rep:
    """One repetition with its denominators (None: unknown)."""

    number: int
    name: str  # the measured phase, LANE/<number>
    chain: list[str] = field(default_factory=list)  # its phases in the order they ran
    generation: str | None = None
    finished: float | None = None  # requests the engine finished in the measured phase
    mean: float | None = None  # seconds, the engine's histogram (sum over count)
    latency: Mapping[str, Any] | None = None
    sent: int | None = None  # the probe's record of the measured pass
    failed: int | None = None
    output_tokens: int | None = None  # completion tokens the probe received (measured pass)
    generated: float | None = None  # generation tokens the engine's /metrics counted
    sequences: tuple[str | None, ...] = ()  # sequence_sha256 of each pass of the chain
    outputs: list[list[Mapping[str, Any]] | None] = field(default_factory=list)  # per pass
    recorded: bool = False
    problems: list[str] = field(default_factory=list)
    deltas: Mapping[str, Any] = field(default_factory=dict)  # of the measured phase
    identities: list[dict[str, identity.Value]] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)  # phases with requests in flight at an edge


@dataclass
class LaneArm:
    reps: list[Rep] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # of the lane as a whole

    @property
    def total_count(self) -> float:
        return sum(r.finished or 0 for r in self.reps)

    @property
    def mean(self) -> float | None:
        """The pooled mean: every request weighs the same."""
        total = sum(float(r.latency["sum"]) for r in self.reps if r.latency)
        return total / self.total_count if self.total_count else None

    @property
    def spread(self) -> float | None:
        """(slowest - fastest repetition mean) / pooled mean."""
        means = [r.mean for r in self.reps if r.mean is not None]
        if len(means) < 2 or not self.mean:
            return None
        return (max(means) - min(means)) / self.mean

    @property
    def buckets(self) -> list[tuple[float, float]]:
        return sum_buckets(r.latency for r in self.reps)

    def total(self, key: str) -> float | None:
        """A delta of the measured passes summed over the repetitions (None: unknown in one)."""
        values = [r.deltas.get(key) for r in self.reps]
        if not values or None in values:
            return None
        return float(sum(v or 0 for v in values))

    @property
    def blocked_tokens(self) -> dict[str, float] | None:
        """(v3) Blocked tokens by reason of the measured passes, summed (None: unknown in one)."""
        out: dict[str, float] = {}
        for r in self.reps:
            blocked = r.deltas.get("blocked_tokens")
            if blocked is None:
                return None
            for reason, n in blocked.items():
                out[reason] = out.get(reason, 0.0) + float(n)
        return out if self.reps else None

    @property
    def output_tokens(self) -> int | None:
        tokens = [r.output_tokens for r in self.reps]
        return None if not tokens or None in tokens else sum(t or 0 for t in tokens)


def lane_arm(doc: Mapping[str, Any], lane: str, allow_unrecorded: bool = False) -> LaneArm:
    phases = {str(p.get("name")): p for p in doc.get("phases") or []}
    passes = {str(p.get("phase")): p for p in doc.get("passes") or []}
    measured = re.compile(re.escape(lane) + r"/([0-9]+)")
    before = re.compile(re.escape(lane) + r"/([0-9]+)/.+")
    numbers: dict[int, list[str]] = {}
    for name in phases:
        if (m := measured.fullmatch(name)) or (m := before.fullmatch(name)):
            numbers.setdefault(int(m.group(1)), []).append(name)
    out = LaneArm()
    for number in sorted(numbers):
        name = f"{lane}/{number}"
        if name not in phases:
            out.problems.append(f"repetition {name} is missing: its passes "
                                f"{', '.join(sorted(numbers[number]))} ran without it")
            continue
        out.reps.append(_rep(number, name, numbers[number], phases, passes, allow_unrecorded))
    found = [r.number for r in out.reps]
    if found and found != list(range(1, len(found) + 1)):
        out.problems.append(f"the repetitions are numbered {', '.join(map(str, found))}: one "
                            "that ran is missing from the evidence")
    planned = {p.get("repetitions") for r in out.reps for n in r.chain
               if (p := passes.get(n)) and p.get("repetitions")}
    if len(planned) == 1 and (want := next(iter(planned))) != len(out.reps):
        out.problems.append(f"the probe planned {want} repetitions, the evidence holds "
                            f"{len(out.reps)}")
    by_generation: dict[str, list[str]] = {}
    for r in out.reps:
        if r.generation:
            by_generation.setdefault(r.generation, []).append(r.name)
    for generation, names in by_generation.items():
        if len(names) > 1:
            out.problems.append(f"repetitions {' and '.join(names)} ran on one incarnation "
                                f"({generation}): each repetition needs its own fresh "
                                "incarnation (probe --fresh-command)")
    return out


def _rep(number: int, name: str, names: Sequence[str], phases: Mapping[str, Mapping[str, Any]],
         passes: Mapping[str, Mapping[str, Any]], allow_unrecorded: bool) -> Rep:
    chain = sorted(names, key=lambda n: ((phases[n].get("begin") or {}).get("at") or 0.0,
                                         n == name))
    rep = Rep(number, name, chain)
    if chain[-1] != name:
        rep.problems.append(f"ran {chain[-1]} after its measured pass {name}")
    generations = {phases[n].get("generation") for n in chain}
    rep.generation = str(phases[name].get("generation"))
    if len(generations) > 1:
        rep.problems.append("ran its passes on more than one incarnation: "
                            + ", ".join(sorted(map(str, generations))))
    recorded = [passes.get(n) for n in chain]
    rep.recorded = all(recorded)
    if not rep.recorded and not allow_unrecorded:
        rep.problems.append(NO_RECORD)
    for n, p in zip(chain, recorded, strict=True):
        rep.problems += _phase_problems(n, phases[n], p, measured=n == name)
        rep.identities.append(identity.of_phase(phases[n], p))
        rep.identities.append(identity.of_phase(phases[n], p, edge="end"))
    rep.busy = [n for n in chain if any((phases[n].get(edge) or {}).get("inflight")
                                        for edge in ("begin", "end"))]
    first = lookups_before(phases[chain[0]])
    if first is None:
        rep.problems.append(f"cannot show a fresh incarnation: {chain[0]} has no lookup counters "
                            "at its begin")
    elif first:
        rep.problems.append(f"did not begin on a fresh incarnation: {chain[0]} began after "
                            f"{first:,g} lookups (probe --fresh-command gives each repetition "
                            "its own)")
    for a, b in itertools.pairwise(chain):
        if (why := gap(phases[a], phases[b])) is not None:
            rep.problems.append(f"is invalid: {why}")
    for n, p in zip(chain[1:], recorded[1:], strict=False):
        previous = (p or {}).get("previous")
        if p and previous and previous != chain[chain.index(n) - 1]:
            rep.problems.append(f"is invalid: the probe ran {previous} before {n}, which the "
                                "evidence does not hold")
    phase = phases[name]
    d = phase.get("deltas") or {}
    rep.deltas = d
    latency = d.get("e2e_latency_seconds")
    if latency and latency.get("count"):
        rep.finished = float(latency["count"])
        rep.mean = float(latency["sum"]) / rep.finished
        rep.latency = latency
    elif phase.get("state") == "ended" and phase.get("valid"):
        rep.problems.append(f"is invalid: the engine's latency histogram shows no finished "
                            f"requests in {name}")
    rep.generated = d.get("generation_tokens")
    mine = passes.get(name) or {}
    rep.sent, rep.failed = mine.get("sent"), mine.get("failed")
    rep.output_tokens = mine.get("completion_tokens")
    rep.sequences = tuple((passes.get(n) or {}).get("sequence_sha256") for n in chain)
    rep.outputs = [(passes.get(n) or {}).get("outputs") for n in chain]
    return rep


def _phase_problems(name: str, phase: Mapping[str, Any], recorded: Mapping[str, Any] | None,
                    measured: bool) -> list[str]:
    """Why one phase of a repetition voids it (empty: it does not)."""
    if phase.get("state") != "ended":
        return [f"is invalid: {name} is still open"]
    if not phase.get("valid"):
        return [("is invalid: " if measured else f"is invalid: its pass {name}: ")
                + "; ".join(phase.get("invalid_reasons") or ["invalid"])]
    out = [f"is invalid: {name}: its counters contradict each other: {why}"
           for why in accounting(phase)]
    if recorded:
        if recorded.get("failed"):
            out.append(f"is invalid: {recorded['failed']} of {recorded.get('sent')} requests of "
                       f"{name} failed (every output is kept in the probe's record)")
        out += [f"is invalid: {why}" for why in foreign_traffic("", name, phase, recorded)]
        d = phase.get("deltas") or {}
        generated, received = d.get("generation_tokens"), recorded.get("completion_tokens")
        if generated is not None and received is not None and generated != received:
            out.append(f"is invalid: the engine's /metrics counted {generated:,g} generated tokens "
                       f"in {name}, the probe received {received:,}")
    return out
