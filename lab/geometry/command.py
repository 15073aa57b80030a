"""`helios-exporter geometry`: the offload records and slabs a model layout implies
(docs/interface.md section 9).

    helios-exporter geometry --layout L.json [--budget-bytes N] [--row-fraction F] [--json]
    helios-exporter geometry --layout L.json --partitions [--fractions F,F,...]
                             [--evidence evidence.json [--phase NAME]] [--json]

Exit codes: 0 done; 2 bad input: options, a layout that fails a check (each its own message,
layout.CHECKS), a partition that breaks an engine limit (without --partitions, which marks
those instead), an evidence file without a usable phase.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from exporter import defaults
from exporter import layout as lay
from exporter.options import Option
from lab.geometry import partitions as parts

PROG = "helios-exporter geometry"


def _fractions(text: str) -> tuple[Fraction, ...]:
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError("expected fractions separated by commas, e.g. 0.25,0.5")
    return tuple(lay.fraction(t) for t in items)


SHOWN = "partitions (shown, not chosen: nothing here picks one)"
OPTIONS = (
    Option("--layout", "path", None, "the model layout (JSON; docs/interface.md section 9)",
           required=True, metavar="FILE"),
    Option("--budget-bytes", "int", defaults.GEOMETRY_BUDGET_BYTES, "the host offload budget",
           low=0, metavar="N", default_text=f"{defaults.GEOMETRY_BUDGET_BYTES} = 32 GiB"),
    Option("--row-fraction", lay.fraction, defaults.GEOMETRY_ROW_FRACTION,
           "share of the budget for rows, as sized_counts carves it, e.g. 0.25 or 1/4",
           metavar="F"),
    Option("--json", "bool", False, "print one JSON object"),
    Option("--partitions", "bool", False, "list row fractions of the same budget with their row "
           "and page capacities (and the limits each breaks) instead of one partition",
           group=SHOWN),
    Option("--fractions", _fractions, parts.DEFAULT_FRACTIONS, "the row fractions to list",
           metavar="F,F,...", default_text="1/16 to 15/16 in sixteenths", group=SHOWN),
    Option("--evidence", "path", None, "an evidence.json: the checkpoint demand its phase "
           "measured, beside each partition", metavar="FILE", group=SHOWN),
    Option("--phase", "text", None, "the phase of --evidence", metavar="NAME",
           default_text="its only phase", group=SHOWN),
)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (lay.LayoutError, parts.EvidenceError, _Usage) as exc:
        problems = exc.problems if isinstance(exc, lay.LayoutError) else (exc,)
        for problem in problems:
            print(f"{PROG}: {problem}", file=sys.stderr)
        return 2


class _Usage(ValueError):
    pass


def _run(args: argparse.Namespace) -> int:
    if not args.partitions and (args.evidence or args.phase):
        raise _Usage("--evidence and --phase go with --partitions")
    if not args.partitions and args.fractions is not parts.DEFAULT_FRACTIONS:
        # Given (on the command line or in the environment): a new tuple, never the default's.
        raise _Usage("--fractions lists the partitions of --partitions: give --partitions too, "
                     "or --row-fraction for one partition")
    if args.phase and not args.evidence:
        raise _Usage("--phase names a phase of --evidence: give the file too")
    layout = lay.load(args.layout)
    recs = lay.records(layout)
    if args.partitions:
        # The budget must be valid whatever the fractions: checked once, before the table.
        lay.partition(recs, args.budget_bytes, Fraction(0))
        demand = None if args.evidence is None else parts.read_demand(args.evidence, args.phase)
        rows = parts.table(layout, recs, args.budget_bytes, args.fractions, demand)
        doc = _partitions_doc(layout, recs, args.budget_bytes, rows, demand)
        sys.stdout.write(json.dumps(doc, indent=1) + "\n" if args.json else
                         _partitions_text(layout, recs, args.budget_bytes, rows, demand))
        return 0
    _, part = lay.derive(layout, args.budget_bytes, args.row_fraction)
    doc = _doc(layout, recs, part)
    sys.stdout.write(json.dumps(doc, indent=1) + "\n" if args.json else _text(layout, recs, part))
    return 0


# -- one partition --------------------------------------------------------------------------------
def _records_doc(layout: lay.Layout, recs: lay.Records) -> dict[str, Any]:
    return {
        "layout": layout.name,
        "tp": recs.tp,
        "block_tokens": layout.block_tokens,
        "alignment": recs.alignment,
        "page_record_bytes": recs.page_record_bytes,
        "row_record_bytes": recs.row_record_bytes,
        "per_rank": {kind: {"bytes": share.bytes, "aligned_bytes": share.aligned}
                     for kind, share in (("page", recs.page), ("row", recs.row))},
    }


def _partition_doc(part: lay.Partition) -> dict[str, Any]:
    return {
        "row_fraction": lay.fraction_text(part.row_fraction),
        "rows": part.rows,
        "pages": part.pages,
        "row_slab_bytes": part.row_slab_bytes,
        "page_slab_bytes": part.page_slab_bytes,
        "unused_bytes": part.unused_bytes,
    }


def _doc(layout: lay.Layout, recs: lay.Records, part: lay.Partition) -> dict[str, Any]:
    return {**_records_doc(layout, recs), "budget_bytes": part.budget_bytes,
            **_partition_doc(part)}


def _b(n: int) -> str:
    return f"{n:,} B"


def size(n: int) -> str:
    """Bytes with their binary unit: 1,048,576 B (1 MiB), 163,586,048 B (156.004 MiB)."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n:,} B ({n / scale:.6g} {unit})"
    return _b(n)


def _records_text(layout: lay.Layout, recs: lay.Records) -> list[str]:
    lines = [f"layout {layout.name}: tp {recs.tp}, {layout.block_tokens} tokens a page, each "
             f"rank's share aligned to {_b(recs.alignment)}",
             f"{'record':<6} {'per rank':>16} {'aligned':>16}   per host record ({recs.tp} ranks)"]
    for kind, share, whole in (("page", recs.page, recs.page_record_bytes),
                               ("row", recs.row, recs.row_record_bytes)):
        lines.append(f"{kind:<6} {_b(share.bytes):>16} {_b(share.aligned):>16}   {size(whole)}")
    return lines


def _text(layout: lay.Layout, recs: lay.Records, part: lay.Partition) -> str:
    width = len(f"{part.budget_bytes:,}")
    lines = [*_records_text(layout, recs), "",
             f"budget {size(part.budget_bytes)}, row fraction "
             f"{lay.fraction_text(part.row_fraction)} (sized_counts: whole rows in the row "
             "share, whole pages in the rest)"]
    for kind, count, rec, slab in (("rows", part.rows, part.row_record_bytes, part.row_slab_bytes),
                                   ("pages", part.pages, part.page_record_bytes,
                                    part.page_slab_bytes)):
        lines.append(f"{kind:<6} {count:>{width - 4},} x {rec:>13,} B = {slab:>{width},} B")
    lines.append(f"{'unused':<6} {'':>{width - 4}}   {'':>13}     {part.unused_bytes:>{width},} B")
    return "\n".join(lines) + "\n"


# -- partitions -----------------------------------------------------------------------------------
CAVEAT = ("Shown, not chosen: no row fraction is picked here. The allocator plan asks for one "
          "explicit partition, selected by an engineer from measured checkpoint demand and exact "
          "record costs, and no automatic choice based solely on one corpus; several stores per "
          "request are not several useful endpoints.")


def _partitions_doc(layout: lay.Layout, recs: lay.Records, budget: int, rows: Sequence[parts.Row],
                    demand: parts.Demand | None) -> dict[str, Any]:
    return {
        **_records_doc(layout, recs),
        "budget_bytes": budget,
        "partitions": [{**_partition_doc(r.partition), "breaks": list(r.breaks),
                        **({} if demand is None else {"rows_left": r.rows_left,
                                                      "pages_left": r.pages_left})}
                       for r in rows],
        "demand": None if demand is None else {
            "evidence": demand.source, "phase": demand.phase, "rows": demand.rows,
            "pages": demand.pages, "requests": demand.requests,
            "record_bytes": demand.record_bytes},
        "note": CAVEAT,
    }


def _partitions_text(layout: lay.Layout, recs: lay.Records, budget: int,
                     rows: Sequence[parts.Row], demand: parts.Demand | None) -> str:
    lines = [*_records_text(layout, recs), "", f"Partitions of {size(budget)}:"]
    if demand is not None:
        per = (f", {demand.rows / demand.requests:.3g} rows and {demand.pages / demand.requests:.3g}"
               f" pages per request over {demand.requests:,} requests"
               if demand.requests else "")
        lines.append(f"checkpoint demand of phase {demand.phase} ({demand.source}): "
                     f"{demand.rows:,} rows (checkpoints stored), {demand.pages:,} pages "
                     f"(pages allocated){per}; 'left' is capacity minus demand, negative "
                     "when short")
        ours = recs.record_bytes()
        other = {k: v for k, v in demand.record_bytes.items() if ours.get(k) not in (None, v)}
        if other:
            lines.append("the evidence's engine had other records ("
                         + ", ".join(f"{k} {v:,} B, not {ours[k]:,} B" for k, v in other.items())
                         + "): its demand counts that engine's records, not this layout's")
    head = ["row fraction", "rows", "pages", "row slab B", "page slab B", "unused B"]
    if demand is not None:
        head += ["rows left", "pages left"]
    head.append("breaks")
    body = []
    for r in rows:
        p = r.partition
        cells = [lay.fraction_text(p.row_fraction), f"{p.rows:,}", f"{p.pages:,}",
                 f"{p.row_slab_bytes:,}", f"{p.page_slab_bytes:,}", f"{p.unused_bytes:,}"]
        if demand is not None:
            cells += [f"{r.rows_left:+,}", f"{r.pages_left:+,}"]
        cells.append(", ".join(r.breaks) or "-")
        body.append(cells)
    widths = [max(len(c[i]) for c in (head, *body)) for i in range(len(head))]
    for cells in (head, *body):
        lines.append("  ".join(c.rjust(w) if i < len(cells) - 1 else c
                               for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip())
    lines += ["", CAVEAT]
    return "\n".join(lines) + "\n"
