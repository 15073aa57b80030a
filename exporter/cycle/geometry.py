"""Does the offload snapshot's arithmetic hold? (`helios_offload_geometry_consistent`)

An engine whose counters or geometry disagree with each other makes every offload figure suspect:
a budget smaller than the slabs carved from it, more bytes resident than the budget, more hits and
misses than lookups, records of another size than the pinned model layout implies. Each rule is
checked when the snapshot carries its inputs; the result is None (the metric absent) when it
carries the inputs of none. Rules (names from labels.GEOMETRY_RULES):

- `slabs_within_budget`: the sum over the slabs present of capacity x record_bytes <= budget_bytes.
- `resident_within_budget`: resident.bytes <= budget_bytes.
- `lookups_accounted`: hits + the sum of misses over every reason <= lookups.total (a lookup still
  in flight may be counted in total before its outcome, so below is fine).
- `record_bytes_match_layout` (with `--expect-layout`): each slab present has the record_bytes
  the layout derives for its kind (exporter/layout.py); its value is the number of slabs that
  differ, its limit 0.

`free <= capacity` of a slab is a schema rule: a snapshot breaking it is rejected, not inconsistent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from exporter.layout import Records
from exporter.snapshot.model import Offload


@dataclass(frozen=True, slots=True)
class Rule:
    rule: str
    ok: bool
    value: int  # the left-hand side: slab bytes, resident bytes, hits + misses, slabs that differ
    limit: int  # what it must not exceed: budget_bytes, lookups.total, 0
    detail: str  # the arithmetic, for /status and logs
    # The layout rule only: the layout's name, and record bytes by slab kind.
    layout: str | None = None
    expected: Mapping[str, int] | None = None
    found: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Geometry:
    rules: tuple[Rule, ...]  # the rules whose inputs the snapshot carried

    @property
    def consistent(self) -> bool:
        return all(r.ok for r in self.rules)

    @property
    def failed(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if not r.ok)


def check(offload: Offload | None, layout: Records | None = None) -> Geometry | None:
    """The rules the snapshot's offload section can be checked against (with `layout`, the
    records it must have too); None when none."""
    if offload is None:
        return None
    rules: list[Rule] = []
    budget = offload.budget_bytes
    if budget is not None and offload.slabs:
        terms = [(kind, s.capacity, s.record_bytes) for kind, s in sorted(offload.slabs.items(),
                                                                         key=_slab_order)]
        carved = sum(cap * size for _, cap, size in terms)
        arithmetic = " + ".join(f"{kind} {cap} x {size}" for kind, cap, size in terms)
        rules.append(_rule("slabs_within_budget", carved, budget,
                           f"{arithmetic} = {carved}", "budget_bytes"))
    if budget is not None and offload.resident_bytes is not None:
        rules.append(_rule("resident_within_budget", offload.resident_bytes, budget,
                           f"resident.bytes {offload.resident_bytes}", "budget_bytes"))
    lookups = offload.lookups
    if lookups is not None and (lookups.hits is not None or lookups.misses is not None):
        hits = lookups.hits or 0
        misses = sum((lookups.misses or {}).values())
        rules.append(_rule("lookups_accounted", hits + misses, lookups.total,
                           f"hits {hits} + misses {misses} = {hits + misses}", "lookups.total"))
    if layout is not None and offload.slabs:
        rules.append(_layout_rule(offload, layout))
    return Geometry(tuple(rules)) if rules else None


def _layout_rule(offload: Offload, layout: Records) -> Rule:
    derived = layout.record_bytes()
    kinds = sorted((k for k in offload.slabs if k in derived), key=lambda k: _slab_order((k, 0)))
    expected = {k: derived[k] for k in kinds}
    found = {k: offload.slabs[k].record_bytes for k in kinds}
    differ = [k for k in kinds if found[k] != expected[k]]
    parts = [f"{k} {found[k]} {'!=' if k in differ else '='} {expected[k]}" for k in kinds]
    detail = f"{', '.join(parts)} (snapshot record_bytes vs layout {layout.layout})"
    return Rule("record_bytes_match_layout", not differ, len(differ), 0, detail,
                layout.layout, expected, found)


def _slab_order(item: tuple[str, object]) -> int:
    return 0 if item[0] == "row" else 1


def _rule(name: str, value: int, limit: int, lhs: str, limit_name: str) -> Rule:
    ok = value <= limit
    return Rule(name, ok, value, limit, f"{lhs} {'<=' if ok else '>'} {limit_name} {limit}")
