"""What must be the same engine in both arms of a comparison, dimension by dimension, and the one
change a comparison may declare (docs/interface.md section 7.1).

Where each dimension is read: the image, package, checkpoint, rank count (`tp_ranks`), total
budget and slab geometry (`allocator`) from the engine's snapshot in the phase's begin capture;
the power limit from NVML (the enforced limit of every rank's GPU, as the sidecar last read it);
runtime, quantization, speculation and recipe are not in the snapshot (schema v1), so they are
what the probe was told (`probe --declare DIM=VALUE`, also for a power limit NVML cannot read).
A dimension known in neither way is `unknown`, and a comparison with an unknown dimension is
never admitted: nobody checked that it was held fixed.

At most one of runtime, quantization, allocator or speculation may differ, and only when declared
(`--allow-difference`). A runtime arm is another build: its image and package may differ with it.
A quantization arm loads another checkpoint. An allocator or speculation change delivered as a
new build may move the image and package only with `--new-build`. The total budget never may
differ: a larger cache allocation is a separate resource tradeoff, not an allocator change. Nor
may the bytes the slabs actually take (`allocated`: capacity x record bytes, summed over the
slabs): each arm's must fit its budget, and the two may differ only by what carving whole records
leaves unused (less than one record of each slab), so that an allocator arm cannot win by
allocating more of the same budget.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

DIMENSIONS: Final = ("image_digest", "package", "checkpoint", "runtime", "quantization",
                     "speculation", "tp_ranks", "power_limit", "recipe", "budget", "allocated",
                     "records", "allocator", "source_commit", "source_diff")
DECLARABLE: Final = ("runtime", "quantization", "speculation", "recipe", "power_limit",
                     "source_commit", "source_diff")
# (v3) A new build's source: the commit it was built from and the SHA-256 of the diff applied on
# top (probe --declare). Needed, and only needed, with --new-build.
SOURCE: Final = ("source_commit", "source_diff")
SOURCE_VALUE: Final = {"source_commit": re.compile(r"[0-9a-f]{7,64}"),
                       "source_diff": re.compile(r"[0-9a-f]{64}")}
# A package names its version and the commit it was built from: helios-2.14.0+47581cca[.local]
PACKAGE: Final = re.compile(r"(?P<version>[^+]*)(?:\+(?P<commit>[0-9a-f]{7,64}))?(?P<local>.*)")
CHANGES: Final = ("runtime", "quantization", "allocator", "speculation")
ALIASES: Final = {"geometry": "allocator"}  # the v2 name of the allocator change
# The dimensions each declared change may move (its own first).
MOVES: Final = {"runtime": ("runtime", "image_digest", "package"),
                "quantization": ("quantization", "checkpoint"),
                "allocator": ("allocator",),
                "speculation": ("speculation",)}
BUILD: Final = ("image_digest", "package")
GEOMETRY_CHANGE: Final = ("a change in record size or in the slabs themselves is a geometry change "
                          "(the model layout's record costs), not an allocator change: an "
                          "allocator change repartitions the same records within the same budget")
BUDGET_NEVER: Final = ("the total budget never may differ: a larger cache allocation is a separate "
                       "resource tradeoff, not an allocator change")
NOT_A_CHANGE: Final = {
    "budget": BUDGET_NEVER,
    "image_digest": "an image is not a change of its own: declare the change it delivers "
                    "(runtime; allocator or speculation with --new-build)",
    "package": "a package is not a change of its own: declare the change it delivers "
               "(runtime; allocator or speculation with --new-build)",
    "checkpoint": "a checkpoint is not a change of its own: declare quantization",
    "source_commit": "a build's source is not a change of its own: declare the change it "
                     "delivers with --new-build",
    "source_diff": "a build's source is not a change of its own: declare the change it delivers "
                   "with --new-build",
    "records": GEOMETRY_CHANGE,
}
UNKNOWN: Final = "unknown"
MIXED: Final = "mixed"  # an arm whose phases ran on engines that differ in the dimension
DECLARED_VALUE: Final = re.compile(r"[A-Za-z0-9._:@/+=,-]{1,128}")


def parse_change(text: str) -> str:
    """An `--allow-difference` value: one of CHANGES (or the v2 alias `geometry`)."""
    name = ALIASES.get(text, text)
    if name in CHANGES:
        return name
    if name in NOT_A_CHANGE:
        raise ValueError(f"{text}: {NOT_A_CHANGE[name]}")
    raise ValueError(f"{text!r} is not a change; choose one of {', '.join(CHANGES)}")


def parse_declaration(text: str) -> tuple[str, str]:
    """A `probe --declare DIM=VALUE`: one of DECLARABLE and a bounded value."""
    dim, sep, value = text.partition("=")
    if not sep or dim not in DECLARABLE:
        raise ValueError(f"--declare takes DIM=VALUE with DIM one of {', '.join(DECLARABLE)}, "
                         f"got {text[:80]!r}")
    if not DECLARED_VALUE.fullmatch(value):
        raise ValueError(f"--declare {dim}: the value must be 1-128 of A-Z a-z 0-9 . _ : @ / + "
                         f"= , -, got {value[:80]!r}")
    if dim in SOURCE_VALUE and not SOURCE_VALUE[dim].fullmatch(value):
        raise ValueError(f"--declare {dim}: " + ("a commit (7-64 lowercase hex digits)"
                         if dim == "source_commit" else "the diff's SHA-256 (64 lowercase hex "
                         "digits)") + f", got {value[:80]!r}")
    return dim, value


@dataclass(frozen=True)
class Value:
    text: str
    source: str  # engine | nvml | declared | unknown
    number: int | None = None  # budget and allocated: the bytes
    slack: int = 0  # allocated: what whole-record carving may leave unused (the records' sum)


def geometry_text(slabs: Mapping[str, Any]) -> str:
    return ", ".join(f"{kind} {s.get('capacity', 0):,} x {s.get('record_bytes', 0):,} B"
                     for kind, s in sorted(slabs.items()))


def of_phase(phase: Mapping[str, Any], recorded: Mapping[str, Any] | None,
             edge: str = "begin") -> dict[str, Value]:
    """Every dimension of the engine a phase began on (`edge` "end": ended on)."""
    begin = phase.get(edge) or {}
    ident = begin.get("identity") or {}
    declared = (recorded or {}).get("declared") or {}
    out: dict[str, Value] = {}
    for dim in ("image_digest", "package", "checkpoint"):
        out[dim] = Value(str(ident[dim]), "engine") if ident.get(dim) else Value(UNKNOWN, UNKNOWN)
    ranks = begin.get("ranks")
    out["tp_ranks"] = Value(str(ranks), "engine") if ranks is not None else Value(UNKNOWN, UNKNOWN)
    budget = begin.get("budget_bytes")
    out["budget"] = (Value(f"{budget:,} B", "engine", budget) if budget
                     else Value(UNKNOWN, UNKNOWN))
    slabs = begin.get("slabs") or {}
    sizes = [(s.get("capacity"), s.get("record_bytes")) for s in slabs.values()]
    if slabs and all(isinstance(n, int) and isinstance(b, int) for n, b in sizes):
        allocated = sum(n * b for n, b in sizes)
        out["allocated"] = Value(f"{allocated:,} B", "engine", allocated,
                                 sum(b for _, b in sizes))
    out.setdefault("allocated", Value(UNKNOWN, UNKNOWN))
    out["allocator"] = (Value(geometry_text(slabs), "engine") if slabs
                        else Value(UNKNOWN, UNKNOWN))
    out["records"] = (Value(", ".join(f"{kind} {s.get('record_bytes', 0):,} B"
                                      for kind, s in sorted(slabs.items())), "engine")
                      if slabs else Value(UNKNOWN, UNKNOWN))
    limits = begin.get("power_limits_watts") or {}
    if limits and all(w is not None for w in limits.values()):
        out["power_limit"] = Value(", ".join(f"{w:g} W" for w in sorted(set(limits.values()))),
                                   "nvml")
    for dim in DECLARABLE:
        if dim not in out and declared.get(dim):
            out[dim] = Value(str(declared[dim]), "declared")
        out.setdefault(dim, Value(UNKNOWN, UNKNOWN))
    return {dim: out[dim] for dim in DIMENSIONS}


def of_arm(per_phase: Iterable[dict[str, Value]], label: str,
           refusals: list[str]) -> dict[str, Value]:
    """One value per dimension for an arm: unknown where any of its phases did not know it; an
    arm whose phases ran on engines that differ is refused (one arm, one engine)."""
    seen: dict[str, list[Value]] = {dim: [] for dim in DIMENSIONS}
    for ident in per_phase:
        for dim, value in ident.items():
            seen[dim].append(value)
    out = {}
    for dim, values in seen.items():
        texts = sorted({v.text for v in values if v.source != UNKNOWN})
        if len(texts) > 1:
            refusals.append(f"the {label} arm mixes engines: {dim} is {' and '.join(texts)} "
                            "(one arm, one engine)")
            out[dim] = Value(MIXED, values[0].source)
        elif not values or any(v.source == UNKNOWN for v in values):
            out[dim] = Value(UNKNOWN, UNKNOWN)
        else:
            out[dim] = values[0]
    return out


@dataclass
class Judged:
    rows: list[tuple[str, Value, Value, str]] = field(default_factory=list)  # dim, b, c, status
    refusals: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # dims not known in both arms
    differs: list[str] = field(default_factory=list)


def judge(base: Mapping[str, Value], cand: Mapping[str, Value], change: str | None,
          new_build: bool) -> Judged:
    """Every dimension compared; refusals for what differs without being the declared change."""
    out = Judged()
    allowed = set(MOVES[change]) if change else set()
    if change and new_build:
        allowed |= {*BUILD, "source_diff"}
    for dim in DIMENSIONS:
        b, c = base[dim], cand[dim]
        if dim in SOURCE and not new_build and UNKNOWN in (b.source, c.source):
            out.rows.append((dim, b, c, "not needed (no --new-build)"))
            continue
        if MIXED in (b.text, c.text):
            status = "MIXED: refused"  # of_arm named it (one arm, one engine)
        elif UNKNOWN in (b.source, c.source):
            status = UNKNOWN
            out.unknown.append(dim)
        elif dim == "allocated":
            status = _allocated(base, cand, out)
        elif b.text == c.text:
            status = "same"
        else:
            out.differs.append(dim)
            if dim == "budget":
                status = "DIFFERS: refused"
                out.refusals.append(f"the arms differ in budget ({b.text} vs {c.text}): "
                                    f"{BUDGET_NEVER}")
            elif dim in allowed:
                status = ("DIFFERS: the declared change" if change and dim == MOVES[change][0]
                          else f"DIFFERS: allowed with the declared {change} change")
            else:
                status = "DIFFERS: not declared"
                out.refusals.append(_undeclared(dim, b, c, change))
        out.rows.append((dim, b, c, status))
    if new_build and change:
        out.refusals += _new_build(base, cand, change)
    if change:
        own = MOVES[change][0]
        if own not in out.differs and own not in out.unknown:
            out.refusals.append(f"--allow-difference {change} declared, but both arms have "
                                f"{own} {base[own].text}: the declared change is not there")
    return out


def _allocated(base: Mapping[str, Value], cand: Mapping[str, Value], out: Judged) -> str:
    """The slabs' bytes: within each arm's budget, and the same in both arms up to what whole
    records leave unused (a partition change moves that remainder, never the total)."""
    b, c = base["allocated"], cand["allocated"]
    over = [f"the {label} arm's slabs take {v.text} of its {budget.text} budget"
            for label, v, budget in (("baseline", b, base["budget"]),
                                     ("candidate", c, cand["budget"]))
            if v.number is not None and budget.number is not None and v.number > budget.number]
    if over:
        out.refusals.append("; ".join(over) + ": the slabs do not fit the budget (the snapshot "
                            "contradicts itself)")
        return "DIFFERS: over budget"
    if b.number is None or c.number is None:  # of_arm gives each known value its bytes
        out.refusals.append("the slabs' bytes are not known in an arm")
        return "DIFFERS: refused"
    gap, slack = abs(b.number - c.number), max(b.slack, c.slack)
    if gap < slack:
        return "same" if gap == 0 else f"same total: {gap:,} B apart, under one record of each slab"
    out.differs.append("allocated")
    out.refusals.append(f"the arms allocate different bytes ({b.text} vs {c.text}, {gap:,} B "
                        f"apart, at least one record of each slab): {BUDGET_NEVER}")
    return "DIFFERS: refused"


def _new_build(base: Mapping[str, Value], cand: Mapping[str, Value], change: str) -> list[str]:
    """A new build delivers one change only when its source says so: the same commit as the
    baseline's, another diff on top, and a package of the same version and commit. Anything
    else in it that differs is a second change (another release is a runtime change)."""
    if any(UNKNOWN in (base[d].source, cand[d].source) for d in SOURCE):
        return []  # unknown: the identity gate is not evaluated
    out = []
    if base["source_commit"].text != cand["source_commit"].text:
        out.append(f"--new-build: the candidate was built from commit "
                   f"{cand['source_commit'].text}, the baseline from "
                   f"{base['source_commit'].text}: another commit is a runtime change as well "
                   f"as the declared {change} change (one change per comparison)")
    if base["source_diff"].text == cand["source_diff"].text:
        out.append("--new-build: both builds declare the same source (commit and diff): the "
                   f"{change} change is not in the build")
    for label, arm in (("baseline", base), ("candidate", cand)):
        said = PACKAGE.fullmatch(arm["package"].text)
        commit = said.group("commit") if said else None
        source = arm["source_commit"].text
        if commit and not (source.startswith(commit) or commit.startswith(source)):
            out.append(f"--new-build: the {label}'s package {arm['package'].text} names commit "
                       f"{commit}, its declared source_commit is {source}")
    b, c = PACKAGE.fullmatch(base["package"].text), PACKAGE.fullmatch(cand["package"].text)
    if b and c and base["package"].source != UNKNOWN and (
            b.group("version"), b.group("commit")) != (c.group("version"), c.group("commit")):
        out.append(f"--new-build: the candidate's package {cand['package'].text} is another "
                   f"release than the baseline's {base['package'].text} (version or commit): a "
                   f"runtime change as well as the declared {change} change (one change per "
                   "comparison)")
    return out


def _undeclared(dim: str, b: Value, c: Value, change: str | None) -> str:
    if dim == "records":
        return f"the arms differ in their slabs' records ({b.text} vs {c.text}): {GEOMETRY_CHANGE}"
    if change is None:
        hint = (f"declare it with --allow-difference {dim}" if dim in CHANGES
                else NOT_A_CHANGE.get(dim, "it may not differ"))
        return f"the arms differ in {dim} ({b.text} vs {c.text}), which was not declared: {hint}"
    hint = "one change per comparison"
    if dim in BUILD and change in ("allocator", "speculation"):
        hint += f" (the {change} change delivered as a new build: --new-build)"
    return (f"the arms differ in {dim} ({b.text} vs {c.text}), which the declared {change} "
            f"change does not cover: {hint}")
