"""Which shipped alerts can fire on an engine of another kind (`serve --engine-kind`), from the
one mapping per engine version (exporter/engines/): an alert whose input families the engine
cannot supply is inert on it (its expression finds no series), and docs/engines.md says so, with
the missing signal and why the engine lacks it (`scripts/generate engines-doc`).

An alert's inputs are the `helios_*` families its expression names, through the recording rules
it reads; a family is supplied when any of the signals that fill it (exporter/engines/signals.py,
or the sidecar's own derivations below) is native or derived in the mapping.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from exporter.engines.model import Mapping as EngineMapping
from exporter.engines.signals import SIGNALS

# Families the sidecar derives from signals (no field of their own): supplied when one is.
DERIVED: Mapping[str, tuple[str, ...]] = {
    # Each rule needs one of these (with budget_bytes for the first two).
    "helios_offload_geometry_consistent": ("slab_record_bytes", "resident_bytes", "lookup_hits",
                                           "lookup_misses"),
    "helios_offload_row_pressure_with_page_headroom_total": ("eviction_attempts",),
    "helios_restore_incumbent_inflight_requests": ("inflight_requests",),
    "helios_engine_pin_ok": ("ranks",),  # identity pins and ranks: no identity is exported
}
# Families an alert reads in one alternative of an `or` only: it fires on the others.
ALTERNATIVE: frozenset[tuple[str, str]] = frozenset({
    ("HeliosRestoreWindowClosed", "helios_restore_incumbent_inflight_requests"),
})
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_PARTS = ("_bucket", "_sum", "_count")


def _feeds() -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for signal in SIGNALS:
        out.setdefault(signal.family, []).append(signal.name)
    return {**{k: tuple(v) for k, v in out.items()}, **DERIVED}


def inputs(expr: str, records: Mapping[str, str]) -> list[str]:
    """The families an expression reads that a mapping decides, through recording rules."""
    feeds = _feeds()
    seen: list[str] = []
    todo, done = [expr], set()
    while todo:
        text = todo.pop()
        for name in _NAME.findall(text):
            if name in records and name not in done:
                done.add(name)
                todo.append(records[name])
                continue
            family = next((name.removesuffix(p) for p in _PARTS
                           if name.endswith(p) and name.removesuffix(p) in feeds), name)
            if family in feeds and family not in seen:
                seen.append(family)
    return seen


def missing(family: str, mapping: EngineMapping, expr: str = "") -> str | None:
    """Why `mapping`'s engine cannot supply `family`; None when it can. The reason named is
    that of a signal whose label value the expression selects (`kind="page"`), else the
    first."""
    signals = _feeds()[family]
    rows = [r for r in mapping.rows if r.signal in signals]
    if any(r.how != "absent" for r in rows):
        return None
    selected = set(re.findall(r'(?<![!=~])="([A-Za-z_]+)"', expr))
    row = next((r for r in rows if r.signal.rpartition(".")[2] in selected), rows[0])
    return f"{row.signal}: {row.text}"


def table(rules: Mapping[str, Any], mappings: Sequence[EngineMapping]) -> str:
    """alert | one column per engine version: `fires` or `inert` and what it lacks; only the
    alerts inert somewhere."""
    groups = rules["groups"]
    records = {r["record"]: r["expr"] for g in groups for r in g["rules"] if "record" in r}
    head = ["alert", *(f"{m.kind} {m.version}" for m in mappings)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for group in groups:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            cells = []
            for mapping in mappings:
                why = [w for f in inputs(rule["expr"], records)
                       if (rule["alert"], f) not in ALTERNATIVE
                       and (w := missing(f, mapping, rule["expr"])) is not None]
                cells.append("fires" if not why else "inert: " + "; ".join(dict.fromkeys(why)))
            if any(c != "fires" for c in cells):
                lines.append(f"| `{rule['alert']}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)
