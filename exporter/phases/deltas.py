"""Pure arithmetic of phases: deltas between two captures and their validity (the lab's reading of
them, verdicts, quantiles and accounting, is lab/evidence/arithmetic.py).

A delta is None (JSON null) when either capture lacks the counter: a missing section means
unknown, never 0 (docs/interface.md section 1).
"""

from __future__ import annotations

from typing import Any, Final

from exporter.labels import MISS_REASONS
from exporter.phases.capture import Capture, le_text

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
