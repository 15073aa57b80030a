"""Row/page partitions of one budget, beside the checkpoint demand a phase measured: shown, not
chosen.

The allocator plan (docs/experiments.md) asks for one explicit partition at the same total budget, "selected
from measured checkpoint demand and exact record costs", and "no automatic choice based solely
on this one corpus". So this module lists partitions and what one phase's evidence measured
against each, and never ranks them: the engineer picks, and says why.

A phase's demand, from the captures at its edges (evidence.json, `phases[]`):

- rows: `deltas.host_stores`, the checkpoints it stored (each completed store holds one row);
- pages: pages allocated during the phase, the page slab's used records at the end minus at the
  begin plus `retired_leaves.page` grown meanwhile (pages freed by retiring leaves).

One phase of one corpus: a corpus that stores three checkpoints per request does not show three
independently useful endpoints per request (the control runs'
plan), so the demand is a figure to read, not
a target to size for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

from exporter.layout import Layout, Partition, Records, limit_problems, partition

# 1/16 to 15/16 of the budget to rows: the quarter of sized_counts today among them, and the
# arms of docs/simulator.md (0.3125, 0.75).
DEFAULT_FRACTIONS: Final = tuple(Fraction(n, 16) for n in range(1, 16))


class EvidenceError(ValueError):
    """The evidence file or the phase in it cannot give a demand."""


@dataclass(frozen=True, slots=True)
class Demand:
    phase: str
    source: str  # the evidence file, as given
    rows: int  # checkpoints stored in the phase
    pages: int  # pages allocated in the phase
    requests: int | None  # finished requests, when the evidence counted them
    record_bytes: dict[str, int]  # the evidence's engine's records, by kind: its counts are those


@dataclass(frozen=True, slots=True)
class Row:
    """One partition, the limits it breaks, and (with a demand) what is left over."""

    partition: Partition
    breaks: tuple[str, ...]  # layout.CHECKS names of the limits it breaks
    rows_left: int | None  # capacity minus demand; negative: short
    pages_left: int | None


def table(layout: Layout, recs: Records, budget_bytes: int, fractions: Sequence[Fraction],
          demand: Demand | None) -> list[Row]:
    """Every fraction's partition of the same budget, in the order given."""
    out = []
    for f in fractions:
        part = partition(recs, budget_bytes, f)
        out.append(Row(part, tuple(p.check for p in limit_problems(layout, part)),
                       None if demand is None else part.rows - demand.rows,
                       None if demand is None else part.pages - demand.pages))
    return out


def read_demand(path: Path, phase: str | None) -> Demand:
    """The demand of `phase` (default: the only phase) in an evidence.json."""
    try:
        doc = json.loads(path.read_bytes())
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise EvidenceError(f"{path}: not JSON ({exc})") from None
    phases = doc.get("phases") if isinstance(doc, dict) else None
    if not isinstance(phases, list):
        raise EvidenceError(f"{path}: not an evidence.json (no `phases` list)")
    named = [p for p in phases if isinstance(p, dict) and isinstance(p.get("name"), str)]
    if phase is None:
        if len(named) != 1:
            raise EvidenceError(f"{path}: {len(named)} phases ({_names(named)}): name one with "
                                "--phase")
        chosen = named[0]
    else:
        found = [p for p in named if p["name"] == phase]
        if not found:
            raise EvidenceError(f"{path}: no phase {phase!r} (phases: {_names(named)})")
        chosen = found[0]
    return demand_of(chosen, str(path))


def demand_of(phase: dict[str, Any], source: str) -> Demand:
    name = str(phase.get("name"))
    if phase.get("valid") is not True:
        why = "; ".join(str(r) for r in phase.get("invalid_reasons") or []) or "not valid"
        raise EvidenceError(f"{source}: phase {name!r} is not valid evidence ({why})")
    try:
        deltas, begin, end = phase["deltas"], phase["begin"], phase["end"]
        stores = _int(deltas["host_stores"], "deltas.host_stores")
        used = [_int(c["slabs"]["page"]["capacity"], "slabs.page.capacity")
                - _int(c["slabs"]["page"]["free"], "slabs.page.free") for c in (begin, end)]
        retired = [_int(c["counters"]["retired_leaves.page"], "counters.retired_leaves.page")
                   for c in (begin, end)]
    except (KeyError, TypeError) as exc:
        raise EvidenceError(f"{source}: phase {name!r} lacks {exc} (the page slab and "
                            "retired_leaves.page at both edges, deltas.host_stores)") from None
    except ValueError as exc:
        raise EvidenceError(f"{source}: phase {name!r}: {exc}") from None
    requests = deltas.get("requests")
    sizes = {kind: slab["record_bytes"] for kind, slab in begin["slabs"].items()
             if isinstance(slab, dict) and isinstance(slab.get("record_bytes"), int)}
    return Demand(name, source, stores, used[1] - used[0] + retired[1] - retired[0],
                  int(requests) if isinstance(requests, int | float) else None, sizes)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"{what} is not a count: {value!r}")
    return int(value)


def _names(phases: list[dict[str, Any]]) -> str:
    names = [str(p["name"]) for p in phases]
    return ", ".join(names[:6]) + (" ..." if len(names) > 6 else "") if names else "none"
