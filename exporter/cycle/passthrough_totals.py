"""Pass-through counters that stay counters while the engine's series come and go.

Summing an engine counter family's visible series each poll is not a counter: per-request series
(`requests_total{request_id=...}`, of which an engine keeps only the latest few) and a rank that
restarts make the sum fall back and `rate()` read nonsense. `fold` instead exports, per exported
sample, the sum of the increases of the engine series behind it, poll after poll. Rules, within
one generation (a new generation starts over from nothing):

- A series seen for the first time contributes its whole value. Engine counters are cumulative
  since their incarnation started (the interface's section 1), so that value is what the series
  counted in this generation, whether it was born before the first poll of the generation or
  between two polls. The export thus equals the engine's true total whenever no series was born
  and vanished between two polls, and on the first poll it equals the engine's own sum.
- A series seen at the previous poll contributes its increase since then; a value below the last
  one is a reset (one rank restarted) and the new value is the increase, as `rate()` reads it.
- A series that vanishes keeps what it contributed. One that is back at the next poll but one is
  the same series (a one-poll gap, like a missed scrape in Prometheus); absent longer, it counts
  as a new series.
- Memory: the engine series of the last two polls, one total per exported sample.

A restart of the sidecar starts the totals again from the visible series: Prometheus reads that as
a counter reset, as it does for any restarted exporter. Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from exporter.sources.engine_metrics import DEFAULT_ALLOW, Family, FamilyType, Key, Parsed, build_family

Series = Mapping[str, tuple[Key, float]]  # engine series text -> (exported key, value)
_NONE: Final[Series] = {}


@dataclass(frozen=True, slots=True)
class Totals:
    """The exported pass-through counters and histograms of one generation, after one poll."""

    generation: str
    families: tuple[Family, ...] = ()
    totals: Mapping[str, Mapping[Key, float]] = field(default_factory=dict)
    last: Mapping[str, Series] = field(default_factory=dict)  # the latest poll's engine series
    before: Mapping[str, Series] = field(default_factory=dict)  # the poll before it
    capped: Mapping[str, int] = field(default_factory=dict)  # samples left out by the cap, per family
    invalid: tuple[str, ...] = ()  # histogram families left out this poll: not cumulative


def fold(
    prev: Totals | None,
    parsed: Parsed,
    generation: str,
    allow: Mapping[str, FamilyType] = DEFAULT_ALLOW,
    max_series_per_family: int = 200,
) -> Totals:
    """Add one poll's engine series to the totals of `generation` (a new one starts over)."""
    same = prev is not None and prev.generation == generation
    totals: dict[str, dict[Key, float]] = (
        {family: dict(acc) for family, acc in prev.totals.items()} if same and prev else {}
    )
    capped: dict[str, int] = {}
    for family, series in parsed.series.items():
        last = prev.last.get(family, _NONE) if same and prev else _NONE
        before = prev.before.get(family, _NONE) if same and prev else _NONE
        acc = totals.setdefault(family, {})
        for head, (key, value) in series.items():
            seen = last.get(head) or before.get(head)
            increase = value if seen is None or value < seen[1] else value - seen[1]
            total = acc.get(key)
            if total is None:
                if len(acc) >= max_series_per_family:
                    capped[family] = capped.get(family, 0) + 1
                    continue
                total = 0.0
            acc[key] = total + increase
    families: list[Family] = []
    invalid: list[str] = []
    for family, acc in sorted(totals.items()):
        built = build_family(family, allow.get(family, "counter"), acc)
        if built is None:
            invalid.append(family)
        else:
            families.append(built)
    return Totals(
        generation=generation,
        families=tuple(families),
        totals=totals,
        last=parsed.series,
        before=prev.last if same and prev else {},
        capped=capped,
        invalid=tuple(invalid),
    )
