"""Pure derivations from consecutive snapshots: nothing here does I/O or reads a clock.

- `advance_headroom`: `helios_offload_row_pressure_with_page_headroom_total`, carried across polls.
- `offload_counters`: the snapshot's counters, by field path, from the metric catalogue's rows.
- `counter_decreases`: cumulative engine counters that went down within one generation.
- `advance_engine`: the engine picture the collectors render, from the previous one and this
  cycle's snapshot and pass-through results (counters folded by `passthrough_totals.fold`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from exporter import catalogue
from exporter.cycle.passthrough_totals import Totals, fold
from exporter.defaults import MAX_SERIES_PER_FAMILY, PAGE_HEADROOM_RATIO
from exporter.snapshot.model import Offload, Snapshot
from exporter.sources.engine_metrics import Parsed


def page_free_ratio(offload: Offload | None) -> float | None:
    if offload is None or "page" not in offload.slabs:
        return None
    slab = offload.slabs["page"]
    return None if slab.capacity == 0 else slab.free / slab.capacity


def row_attempts(offload: Offload) -> int | None:
    """`evictions.row.attempts`, read as `helios_offload_eviction_attempts_total` reads it (its
    catalogue row); None when the snapshot has no row evictions."""
    read = catalogue.get("helios_offload_eviction_attempts_total").reader()
    assert read is not None
    value = (read(offload) or {}).get(("row",))
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class Headroom:
    """State of the row-pressure-with-page-headroom counter for one generation."""

    generation: str
    row_attempts: int
    page_free_ratio: float | None
    total: int = 0


def advance_headroom(
    prev: Headroom | None, snap: Snapshot, threshold: float = PAGE_HEADROOM_RATIO
) -> Headroom | None:
    """Count the row-pressure attempts made between two polls while pages had headroom.

    The attempts between two polls are counted when the page slab was at least `threshold`
    free at both ends of the interval. The first poll of a generation only sets the baseline:
    attempts made before the sidecar saw that generation happened at an unknown page occupancy.
    Returns None when the snapshot lacks the row eviction counter.
    """
    offload = snap.offload
    attempts = None if offload is None else row_attempts(offload)
    if offload is None or attempts is None:
        return None
    ratio = page_free_ratio(offload)
    if prev is None or prev.generation != snap.generation:
        return Headroom(snap.generation, attempts, ratio, 0)
    delta = attempts - prev.row_attempts
    total = prev.total
    if (
        delta > 0
        and ratio is not None
        and prev.page_free_ratio is not None
        and min(ratio, prev.page_free_ratio) >= threshold
    ):
        total += delta
    # A decrease (engine bug) re-bases without counting; counter_decreases reports it.
    return Headroom(snap.generation, attempts, ratio, total)


def offload_counters(offload: Offload | None) -> dict[str, int]:
    """Every cumulative counter of the offload section (the catalogue's counters read from the
    snapshot), keyed by its snapshot field path: `evictions.row.attempts`,
    `lookups.misses.evicted` (miss keys folded onto the reason set), ..."""
    if offload is None:
        return {}
    out: dict[str, int] = {}
    for row in catalogue.snapshot_counters():
        read = row.reader()
        assert read is not None
        for values, value in (read(offload) or {}).items():
            out[row.counter_key(values)] = int(value)
    return out


def counter_decreases(prev: Snapshot | None, snap: Snapshot) -> list[str]:
    """Field paths of counters that went down although the generation did not change."""
    if prev is None or prev.generation != snap.generation:
        return []
    before = offload_counters(prev.offload)
    after = offload_counters(snap.offload)
    return sorted(k for k, v in after.items() if k in before and v < before[k])


def _frozen(counts: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(counts))


def _added(counts: Mapping[str, int], more: Mapping[str, int] | tuple[str, ...]) -> Mapping[str, int]:
    total = Counter(counts)
    total.update(more)
    return _frozen(total)


@dataclass(frozen=True, slots=True)
class EnginePicture:
    """What the collectors render for the engine after one cycle."""

    snapshot: Snapshot | None = None  # last good snapshot
    snapshot_current: bool = False  # the latest poll produced it
    polled: bool = False  # a snapshot poll has finished (until then, up or down is unknown)
    headroom: Headroom | None = None
    counter_decreases: int = 0
    decreased_fields: tuple[str, ...] = ()  # of this cycle
    passthrough: Parsed | None = None
    passthrough_generation: str | None = None
    # Pass-through counters and histograms of `passthrough_generation`, carried across cycles.
    native: Totals | None = None
    labels_dropped: Mapping[str, int] = field(default_factory=lambda: _frozen({}))  # by family
    fields_dropped: Mapping[str, int] = field(default_factory=lambda: _frozen({}))  # polls, by field
    malformed_lines: int = 0
    generations_seen: int = 0


def advance_engine(
    prev: EnginePicture,
    snap: Snapshot | None,
    parsed: Parsed | None,
    max_series_per_family: int = MAX_SERIES_PER_FAMILY,
) -> EnginePicture:
    """The engine picture after one cycle; `snap`/`parsed` are None when their poll failed.

    Pass-through counters are folded only in a cycle that knows the generation (a snapshot came
    in): a cycle without one keeps the totals as they were, and the next one with the same
    generation carries on from them."""
    snapshot, headroom, generations = prev.snapshot, prev.headroom, prev.generations_seen
    decreased: tuple[str, ...] = ()
    fields_dropped = prev.fields_dropped
    if snap is not None:
        if snapshot is None or snapshot.generation != snap.generation:
            generations += 1
        decreased = tuple(counter_decreases(snapshot, snap))
        if snap.dropped_fields:
            fields_dropped = _added(fields_dropped, snap.dropped_fields)
        headroom = advance_headroom(headroom, snap)
        snapshot = snap
    labels_dropped, malformed = prev.labels_dropped, prev.malformed_lines
    native = prev.native
    if parsed is not None:
        if parsed.labels_dropped:
            labels_dropped = _added(labels_dropped, parsed.labels_dropped)
        malformed += parsed.malformed_lines
        if snap is not None:
            native = fold(native, parsed, snap.generation,
                          max_series_per_family=max_series_per_family)
            if native.capped:
                labels_dropped = _added(labels_dropped, native.capped)
            malformed += len(native.invalid)  # a histogram no longer cumulative
    return EnginePicture(
        snapshot=snapshot,
        snapshot_current=snap is not None,
        polled=True,
        headroom=headroom,
        counter_decreases=prev.counter_decreases + len(decreased),
        decreased_fields=decreased,
        passthrough=parsed,
        # Tagged only with a generation seen in this very cycle: right after a restart the old
        # one would mislabel the new engine's counters.
        passthrough_generation=snap.generation if snap is not None else None,
        native=native,
        labels_dropped=labels_dropped,
        fields_dropped=fields_dropped,
        malformed_lines=malformed,
        generations_seen=generations,
    )
