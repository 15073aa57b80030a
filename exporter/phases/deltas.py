"""Pure arithmetic of phases: deltas between two captures, validity, cross-source accounting,
probe verdicts, quantiles.

A delta is None (JSON null) when either capture lacks the counter: a missing section means
unknown, never 0 (docs/interface.md section 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from exporter.labels import MISS_REASONS
from exporter.phases.capture import Capture, le_text

# order_sensitive: hits in a replay sent in another order than the prime; reuse (v3): hits in the
# prime's own order (or an order not known), which is not evidence about order.
VERDICTS: Final = ("order_sensitive", "reuse", "incompatible_keys", "no_reuse")
INVALID: Final = "invalid"  # a probe pair whose phase is missing, open or invalid

# Delta name -> the capture counter it comes from (exporter.cycle.derive.offload_counters keys).
COUNTERS: Final = {
    "lookups": "lookups.total",
    "hits": "lookups.hits",
    "prompt_tokens_reused": "host.prompt_tokens_reused",
    "host_tokens_restored": "host.tokens_restored",
    "host_stores": "host.stores",
    "row_pressure_attempts": "evictions.row.attempts",
    "page_pressure_attempts": "evictions.page.attempts",
    "retired_leaves_row": "retired_leaves.row",
    "ancestor_row_compactions": "ancestor_row_compactions",
    # (v3) stores the engine chose to make but did not, and the prompt tokens by source
    "stores_dropped_full": "host.store_outcomes.dropped_full",
    "stores_dropped_ineligible": "host.store_outcomes.dropped_ineligible",
    "stores_failed": "host.store_outcomes.failed",
    "prompt_tokens_computed": "prompt_tokens.computed",
    "prompt_tokens_gpu_prefix": "prompt_tokens.gpu_prefix",
    "prompt_tokens_host_restored": "prompt_tokens.host_restored",
}


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _counter(begin: Capture, end: Capture, key: str) -> int | None:
    a, b = begin.counters.get(key), end.counters.get(key)
    return None if a is None or b is None else b - a


def deltas(begin: Capture, end: Capture) -> dict[str, Any]:
    """What happened between two captures of one generation (docs/interface.md section 7)."""
    out: dict[str, Any] = {name: _counter(begin, end, key) for name, key in COUNTERS.items()}
    out["misses"] = {r: d for r in MISS_REASONS
                     if (d := _counter(begin, end, f"lookups.misses.{r}")) is not None}
    # (v3) None, not {}, when the engine reports no blocked tokens: unknown, never 0
    blocked = {r: d for r in MISS_REASONS
               if (d := _counter(begin, end, f"lookups.blocked_tokens.{r}")) is not None}
    out["blocked_tokens"] = blocked or None
    out["misses_raw"] = {k: v - begin.misses_raw.get(k, 0) for k, v in end.misses_raw.items()
                         if v - begin.misses_raw.get(k, 0)}
    headroom = _diff(begin.headroom_total, end.headroom_total)
    out["row_pressure_with_page_headroom"] = None if headroom is None else int(headroom)
    out["requests"] = _diff(begin.requests, end.requests)
    out["prompt_tokens"] = _diff(begin.prompt_tokens, end.prompt_tokens)
    out["generation_tokens"] = _diff(begin.generation_tokens, end.generation_tokens)
    latency = None
    if begin.latency is not None and end.latency is not None:
        before = dict(begin.latency.buckets)
        buckets = [[le_text(le), n - before.get(le, 0.0)] for le, n in end.latency.buckets]
        latency = {"count": end.latency.count - begin.latency.count,
                   "sum": end.latency.sum - begin.latency.sum,
                   "buckets": buckets}
    out["e2e_latency_seconds"] = latency
    out["seconds"] = end.at - begin.at
    return out


def problems(begin: Capture, end: Capture) -> list[str]:
    """Why a phase's deltas cannot be trusted; empty when the phase is valid."""
    if begin.generation != end.generation:
        return [f"generation changed from {begin.generation} to {end.generation}: the engine "
                "restarted during the phase and its counters began again from zero"]
    out = []
    decreased = sorted(k for k, v in end.counters.items()
                       if k in begin.counters and v < begin.counters[k])
    if decreased:
        out.append("engine counters decreased within one generation: " + ", ".join(decreased))
    for what, a, b in (("requests", begin.requests, end.requests),
                       ("e2e latency count", begin.latency.count if begin.latency else None,
                        end.latency.count if end.latency else None)):
        if a is not None and b is not None and b < a:
            out.append(f"engine {what} decreased within one generation")
    return out


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
