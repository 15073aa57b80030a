"""Cumulative counters of the offload tier, rendered as the snapshot's ``offload`` section."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

Pressure = Literal["row", "page"]
Outcome = Literal["evicted", "pinned", "non_durable", "no_eligible"]
OUTCOMES: tuple[Outcome, ...] = ("evicted", "pinned", "non_durable", "no_eligible")


@dataclass
class EvictionStats:
    """One ``attempts`` per eviction request under one pressure, and how each attempt ended."""

    attempts: int = 0
    evicted: int = 0
    pinned: int = 0
    non_durable: int = 0
    no_eligible: int = 0

    def record(self, outcome: Outcome) -> None:
        self.attempts += 1
        setattr(self, outcome, getattr(self, outcome) + 1)

    def as_dict(self) -> dict[str, int]:
        return {"attempts": self.attempts, **{name: getattr(self, name) for name in OUTCOMES}}


@dataclass
class TierStats:
    """Everything the snapshot reports as cumulative since the incarnation started."""

    row_evictions: EvictionStats = field(default_factory=EvictionStats)
    page_evictions: EvictionStats = field(default_factory=EvictionStats)
    retired_leaf_rows: int = 0
    retired_leaf_pages: int = 0
    ancestor_row_compactions: int = 0
    lookups: int = 0
    lookup_hits: int = 0
    lookup_misses: Counter[str] = field(default_factory=Counter)
    host_stores: int = 0
    tokens_restored: int = 0
    prompt_tokens_reused: int = 0
    # Not in the snapshot of docs/interface.md section 1: stores dropped because no record could be freed.
    store_failures: int = 0

    def evictions(self, pressure: Pressure) -> EvictionStats:
        return self.row_evictions if pressure == "row" else self.page_evictions

    def record_miss(self, reason: str) -> None:
        self.lookups += 1
        self.lookup_misses[reason] += 1

    def record_hit(self) -> None:
        self.lookups += 1
        self.lookup_hits += 1

    def as_dict(self) -> dict[str, Any]:
        """The counter part of the snapshot's ``offload`` section (slabs and resident excluded)."""
        return {
            "evictions": {
                "row": self.row_evictions.as_dict(),
                "page": self.page_evictions.as_dict(),
            },
            "retired_leaves": {"row": self.retired_leaf_rows, "page": self.retired_leaf_pages},
            "ancestor_row_compactions": self.ancestor_row_compactions,
            "lookups": {
                "total": self.lookups,
                "hits": self.lookup_hits,
                "misses": dict(sorted(self.lookup_misses.items())),
            },
            "host": {
                "stores": self.host_stores,
                "tokens_restored": self.tokens_restored,
                "prompt_tokens_reused": self.prompt_tokens_reused,
            },
        }
