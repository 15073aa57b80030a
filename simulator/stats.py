"""Cumulative counters of the offload tier, rendered as the snapshot's ``offload`` section.

``as_dict(1)`` is schema v1's part; ``as_dict(3)`` adds what schema v3 names (store outcomes,
restore transfers, eviction age and idle time, blocked tokens, evicted-by, the prompt-token split:
``exporter/schema/snapshot-v3.schema.json``). Both read the same counters, so a v3 snapshot's v1
fields are the v1 snapshot's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from simulator.retired import CAUSES, Cause

Pressure = Literal["row", "page"]
Outcome = Literal["evicted", "pinned", "non_durable", "no_eligible"]
OUTCOMES: tuple[Outcome, ...] = ("evicted", "pinned", "non_durable", "no_eligible")

# Seconds since stored / since last hit at eviction: a pass of a replay corpus (about 13 s), a few
# minutes of steady traffic, an hour-old tier. Five buckets with +Inf, per pressure and per
# measure: 4 x (5 + 2) series of the 60 that schema v3 may add per engine.
EVICTION_AGE_BUCKETS: tuple[float, ...] = (1.0, 10.0, 60.0, 600.0)
# The modelled host-to-GPU copy of one restore: a probe-52 hit (48 pages and a 16 MiB row, 64 MiB)
# takes 2.7 ms at 25 GB/s, a long-context hit (769 MiB) 32 ms, a hybrid-tp2 row alone 6.5 ms.
RESTORE_SECONDS_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)


def bucket_key(bound: float) -> str:
    """A bucket's upper bound as the snapshot writes it: Prometheus's ``le`` text (``"0.005"``,
    ``"10.0"``)."""
    return repr(float(bound))


@dataclass
class Histogram:
    """Observations in fixed buckets; ``as_dict`` gives them cumulative, with ``+Inf``."""

    bounds: tuple[float, ...]
    count: int = 0
    sum: float = 0.0
    _per_bucket: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if list(self.bounds) != sorted(set(self.bounds)):
            raise ValueError(f"bucket bounds must increase, got {self.bounds}")
        self._per_bucket = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        if value < 0:
            raise ValueError(f"cannot observe a negative value, got {value}")
        self.count += 1
        self.sum += value
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self._per_bucket[i] += 1
                return
        self._per_bucket[-1] += 1

    def buckets(self) -> dict[str, int]:
        out: dict[str, int] = {}
        running = 0
        for bound, n in zip(self.bounds, self._per_bucket, strict=False):
            running += n
            out[bucket_key(bound)] = running
        out["+Inf"] = running + self._per_bucket[-1]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "sum": self.sum, "buckets": self.buckets()}


def _age_histogram() -> Histogram:
    return Histogram(EVICTION_AGE_BUCKETS)


@dataclass
class EvictionStats:
    """One ``attempts`` per eviction request under one pressure, and how each attempt ended;
    for each ``evicted`` attempt, the evicted checkpoint's age and (if it ever served a hit) the
    time since its last hit."""

    attempts: int = 0
    evicted: int = 0
    pinned: int = 0
    non_durable: int = 0
    no_eligible: int = 0
    age: Histogram = field(default_factory=_age_histogram)
    idle: Histogram = field(default_factory=_age_histogram)

    def record(self, outcome: Outcome) -> None:
        self.attempts += 1
        setattr(self, outcome, getattr(self, outcome) + 1)

    def record_evicted(self, age_s: float, idle_s: float | None) -> None:
        """The checkpoint an ``evicted`` attempt took: seconds since its store completed, and
        since it last served a hit (None: it never did)."""
        self.age.observe(max(0.0, age_s))
        if idle_s is not None:
            self.idle.observe(max(0.0, idle_s))

    def as_dict(self, version: int = 1) -> dict[str, Any]:
        out: dict[str, Any] = {
            "attempts": self.attempts, **{name: getattr(self, name) for name in OUTCOMES}
        }
        if version >= 3:
            out["age_seconds"] = self.age.as_dict()
            out["idle_seconds"] = self.idle.as_dict()
        return out


def closed_reason(reason: str) -> str:
    """A raw miss reason on the closed set (``key_mismatch:ckpt=ab12`` is ``key_mismatch``)."""
    return reason.split(":", 1)[0]


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
    host_stores: int = 0  # completed stores: v3's store_outcomes.stored
    tokens_restored: int = 0
    prompt_tokens_reused: int = 0
    # Not in the snapshot: stores dropped because no record could be freed (v3's dropped_full)
    # or because the checkpoint is larger than the page slab (part of v3's dropped_ineligible).
    store_failures: int = 0
    # -- schema v3 ------------------------------------------------------------------------------
    dropped_full: int = 0
    dropped_ineligible: int = 0
    stores_failed: int = 0
    stored_bytes: int = 0
    restore_bytes: int = 0
    restore_seconds: Histogram = field(default_factory=lambda: Histogram(RESTORE_SECONDS_BUCKETS))
    blocked_tokens: Counter[str] = field(default_factory=Counter)  # closed-set reason -> tokens
    evicted_by: Counter[Cause] = field(default_factory=Counter)
    prompt_computed: int = 0
    prompt_gpu_prefix: int = 0
    prompt_host_restored: int = 0

    def evictions(self, pressure: Pressure) -> EvictionStats:
        return self.row_evictions if pressure == "row" else self.page_evictions

    def record_miss(self, reason: str, cause: Cause | None = None) -> None:
        """A miss; ``cause`` names the eviction that made an ``evicted`` miss."""
        self.lookups += 1
        self.lookup_misses[reason] += 1
        if cause is not None:
            self.evicted_by[cause] += 1

    def record_hit(self) -> None:
        self.lookups += 1
        self.lookup_hits += 1

    def record_restore(self, nbytes: int, seconds: float) -> None:
        """One host-to-GPU transfer of a hit's records."""
        self.restore_bytes += nbytes
        self.restore_seconds.observe(seconds)

    def as_dict(self, version: int = 1) -> dict[str, Any]:
        """The counter part of the snapshot's ``offload`` section (slabs, resident and geometry
        excluded) for schema ``version`` 1 or 3."""
        lookups: dict[str, Any] = {
            "total": self.lookups,
            "hits": self.lookup_hits,
            "misses": dict(sorted(self.lookup_misses.items())),
        }
        host: dict[str, Any] = {
            "stores": self.host_stores,
            "tokens_restored": self.tokens_restored,
            "prompt_tokens_reused": self.prompt_tokens_reused,
        }
        out: dict[str, Any] = {
            "evictions": {
                "row": self.row_evictions.as_dict(version),
                "page": self.page_evictions.as_dict(version),
            },
            "retired_leaves": {"row": self.retired_leaf_rows, "page": self.retired_leaf_pages},
            "ancestor_row_compactions": self.ancestor_row_compactions,
            "lookups": lookups,
            "host": host,
        }
        if version >= 3:
            lookups["blocked_tokens"] = dict(sorted(self.blocked_tokens.items()))
            lookups["evicted_by"] = {cause: self.evicted_by[cause] for cause in CAUSES}
            host["store_outcomes"] = {
                "stored": self.host_stores, "dropped_full": self.dropped_full,
                "dropped_ineligible": self.dropped_ineligible, "failed": self.stores_failed,
            }
            host["stored_bytes"] = self.stored_bytes
            host["restore_transfers"] = {
                "count": self.restore_seconds.count, "bytes": self.restore_bytes,
                "seconds_sum": self.restore_seconds.sum,
                "seconds_buckets": self.restore_seconds.buckets(),
            }
            out["prompt_tokens"] = {
                "computed": self.prompt_computed, "gpu_prefix": self.prompt_gpu_prefix,
                "host_restored": self.prompt_host_restored,
            }
        return out
