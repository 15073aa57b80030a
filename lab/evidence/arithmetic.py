"""The lab's arithmetic over phases as GET /experiment/phases serves them: probe verdicts,
per-request figures and mean latency, summed buckets and their quantiles, cross-source accounting,
and what reached the engine between two phases (the deltas themselves are the sidecar's,
exporter/phases/deltas.py).

A figure is None when an input lacks it: a missing section means unknown, never 0
(docs/interface.md section 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

# order_sensitive: hits in a replay sent in another order than the prime; reuse (v3): hits in the
# prime's own order (or an order not known), which is not evidence about order.
VERDICTS: Final = ("order_sensitive", "reuse", "incompatible_keys", "no_reuse")
INVALID: Final = "invalid"  # a probe pair whose phase is missing, open or invalid

def verdict(replay: Mapping[str, Any], prime_order: str | None = None,
            replay_order: str | None = None) -> str:
    """The probe verdict of a replay phase's deltas (docs/interface.md section 7): hits are
    order sensitivity only when the replay was sent in another order than the prime."""
    hits = replay.get("hits") or 0
    if hits > 0:
        if prime_order and replay_order and prime_order != replay_order:
            return "order_sensitive"
        return "reuse"
    misses = replay.get("misses") or {}
    if (misses.get("key_mismatch") or 0) + (misses.get("no_checkpoint") or 0) > 0:
        return "incompatible_keys"
    return "no_reuse"


def per_request(value: float | None, requests: float | None) -> float | None:
    if value is None or not requests:
        return None
    return value / requests


def mean_latency(latency: Mapping[str, Any] | None) -> float | None:
    if not latency or not latency.get("count"):
        return None
    return float(latency["sum"]) / float(latency["count"])


def sum_buckets(histograms: Iterable[Mapping[str, Any] | None]) -> list[tuple[float, float]]:
    """Bucket counts added up over several deltas (bounds as numbers, ascending)."""
    total: dict[float, float] = {}
    for h in histograms:
        for le, n in (h or {}).get("buckets", ()):
            bound = float(le)
            total[bound] = total.get(bound, 0.0) + float(n)
    return sorted(total.items())


def quantile(q: float, buckets: list[tuple[float, float]] | tuple[tuple[float, float], ...]) -> float | None:
    """Prometheus's histogram_quantile over cumulative buckets: linear within the bucket that
    holds the rank; the highest finite bound when the rank falls in +Inf; None without data."""
    if not buckets or buckets[-1][0] != math.inf:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == math.inf:
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound



def accounting(phase: Mapping[str, Any]) -> list[str]:
    """Where a phase's counters contradict each other (empty: they agree, as far as they are
    known). Within the snapshot: hits or hits and misses above lookups, restored tokens above
    reused ones. Against the engine's own /metrics: reused prompt tokens above the prompt tokens
    it counted, and, when no request was in flight at either edge (every lookup's request had
    finished), lookups other than finished requests. Such a phase measured something else than
    its counters say, so `compare` and the probe's verdicts do not use it."""
    d = phase.get("deltas") or {}
    out = []
    lookups, hits = d.get("lookups"), d.get("hits")
    misses = sum((d.get("misses") or {}).values())
    if lookups is not None and hits is not None:
        if hits > lookups:
            out.append(f"{_g(hits)} hits above {_g(lookups)} lookups")
        elif hits + misses > lookups:
            out.append(f"{_g(hits)} hits and {_g(misses)} misses above {_g(lookups)} lookups")
    restored, reused = d.get("host_tokens_restored"), d.get("prompt_tokens_reused")
    if restored is not None and reused is not None and restored > reused:
        out.append(f"{_g(restored)} host tokens restored above {_g(reused)} prompt tokens reused")
    prompt = d.get("prompt_tokens")
    if reused is not None and prompt is not None and reused > prompt:
        out.append(f"{_g(reused)} prompt tokens reused (snapshot) above the {_g(prompt)} prompt "
                   "tokens the engine's /metrics counted")
    idle = all(((phase.get(edge) or {}).get("inflight") == 0) for edge in ("begin", "end"))
    requests = d.get("requests")
    if idle and lookups is not None and requests is not None and lookups != requests:
        out.append(f"{_g(lookups)} lookups (snapshot) but {_g(requests)} finished requests "
                   "(/metrics) with nothing in flight at either edge")
    return out


def gap(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """What reached the engine between the end capture of phase `before` and the begin capture
    of phase `after` (None: nothing, as far as the engine counts lookups and finished
    requests). Both on one generation; a restart in between is named too."""
    end, begin = before.get("end") or {}, after.get("begin") or {}
    if end.get("generation") != begin.get("generation"):
        return (f"the engine restarted between {before['name']!r} and {after['name']!r} "
                f"(generation {end.get('generation')} -> {begin.get('generation')})")
    lookups = _diff(_num((end.get("counters") or {}).get("lookups.total")),
                    _num((begin.get("counters") or {}).get("lookups.total")))
    requests = _diff(_num(end.get("requests")), _num(begin.get("requests")))
    if lookups is None and requests is None:
        return (f"the engine reported neither lookups nor finished requests, so what came "
                f"between {before['name']!r} and {after['name']!r} is unknown")
    if lookups or requests:
        return (f"{_g(lookups)} lookups and {_g(requests)} finished requests reached the engine "
                f"between {before['name']!r} and {after['name']!r}: another client's traffic "
                "(nothing may be sent between passes)")
    return None


def lookups_before(phase: Mapping[str, Any]) -> float | None:
    """Lookups the incarnation had served when the phase began (0: a fresh incarnation)."""
    return _num(((phase.get("begin") or {}).get("counters") or {}).get("lookups.total"))


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _g(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.6g}"


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a
