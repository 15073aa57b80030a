"""Pure derivations from consecutive snapshots: nothing here does I/O or reads a clock.

- `miss_counts`: engine miss keys folded onto the closed reason set.
- `advance_headroom`: `helios_offload_row_pressure_with_page_headroom_total`, carried across polls.
- `counter_decreases`: cumulative engine counters that went down within one generation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from exporter.labels import MISS_REASONS, miss_reason
from exporter.snapshot import Offload, Snapshot

PAGE_HEADROOM_RATIO = 0.25


def miss_counts(misses: Mapping[str, int]) -> dict[str, int]:
    """Sum engine miss keys per closed-set reason; every reason is present (0 when unseen)."""
    out = dict.fromkeys(MISS_REASONS, 0)
    for key, count in misses.items():
        out[miss_reason(key)] += count
    return out


def page_free_ratio(offload: Offload | None) -> float | None:
    if offload is None or "page" not in offload.slabs:
        return None
    slab = offload.slabs["page"]
    return None if slab.capacity == 0 else slab.free / slab.capacity


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
    if offload is None or "row" not in offload.evictions:
        return None
    attempts = offload.evictions["row"].attempts
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
    """Every cumulative counter of the offload section, keyed by its snapshot field path."""
    if offload is None:
        return {}
    out: dict[str, int] = {}
    for pressure, ev in offload.evictions.items():
        out[f"evictions.{pressure}.attempts"] = ev.attempts
        for outcome, value in ev.outcomes.items():
            out[f"evictions.{pressure}.{outcome}"] = value
    for kind, value in offload.retired_leaves.items():
        out[f"retired_leaves.{kind}"] = value
    if offload.ancestor_row_compactions is not None:
        out["ancestor_row_compactions"] = offload.ancestor_row_compactions
    if offload.lookups is not None:
        out["lookups.total"] = offload.lookups.total
        if offload.lookups.hits is not None:
            out["lookups.hits"] = offload.lookups.hits
        if offload.lookups.misses is not None:
            for reason, value in miss_counts(offload.lookups.misses).items():
                out[f"lookups.misses.{reason}"] = value
    if offload.host is not None:
        for name in ("stores", "tokens_restored", "prompt_tokens_reused"):
            value = getattr(offload.host, name)
            if value is not None:
                out[f"host.{name}"] = value
    return out


def counter_decreases(prev: Snapshot | None, snap: Snapshot) -> list[str]:
    """Field paths of counters that went down although the generation did not change."""
    if prev is None or prev.generation != snap.generation:
        return []
    before = offload_counters(prev.offload)
    after = offload_counters(snap.offload)
    return sorted(k for k, v in after.items() if k in before and v < before[k])
