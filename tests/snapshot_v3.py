"""What a schema v3 snapshot's figures must satisfy beyond its JSON Schema (docs/snapshot.md,
'Invariants'), as a checker: `violations(snapshot)` lists every broken one, empty when all hold.

The tests hold the simulator's snapshots and the v3 fixtures to it. Each rule is checked only
where the snapshot has every field it relates (a v3 field is optional). Miss keys are mapped onto
the closed set the way the sidecar maps them (`exporter.labels.miss_reason`). `strip_v3` gives
the v1 snapshot a v3 one contains.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from itertools import pairwise
from typing import Any

from exporter.catalogue.model import Family
from exporter.labels import PRESSURES, miss_reason
from exporter.snapshot.schemas import additions


def _v3_fields() -> tuple[tuple[str, ...], ...]:
    """What v3 adds under `offload`, from the schema's one source (a `*` is each pressure)."""
    out: dict[tuple[str, ...], None] = {}
    for path in additions(3):
        keys = path.split(".")
        if keys[0] == "offload":
            out[tuple("*" if k in PRESSURES and keys[1] == "evictions" else k
                      for k in keys[1:])] = None
    return tuple(out)


V3_FIELDS = _v3_fields()


def series(row: Family) -> int:
    """The series a row exports when the snapshot has its every field: one per combination of
    its closed label values (`generation` is one), and for a histogram its kept buckets, `_sum`
    and `_count` each."""
    n = math.prod(len(row.values[label]) for label in row.labels if label != "generation")
    return n * (row.max_buckets + 2 if row.type == "histogram" else 1)


def strip_v3(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without any v3 field, at schema_version 1."""
    out = copy.deepcopy(obj)
    out["schema_version"] = 1
    off = out["offload"]
    for path in V3_FIELDS:
        parents = [off]
        for key in path[:-1]:
            parents = [p[k] for p in parents for k in (p if key == "*" else [key]) if k in p]
        for parent in parents:
            parent.pop(path[-1], None)
    return out


# Sums of float seconds: one part in 10^9 (and 1 ns) of slack.
_REL = 1e-9


def _le(a: float, b: float) -> bool:
    return a <= b + max(1e-9, abs(b) * _REL)


def histogram_violations(where: str, count: int, total: float, buckets: dict[str, int]) -> list[str]:
    """Cumulative buckets: counts never fall as the bound grows, `+Inf` equals the count, and
    a histogram with no observation sums to 0."""
    out: list[str] = []
    if buckets.get("+Inf") != count:
        out.append(f"{where}: +Inf {buckets.get('+Inf')} != count {count}")
    bounds = sorted((math.inf if k == "+Inf" else float(k), n) for k, n in buckets.items())
    for (lo, a), (hi, b) in pairwise(bounds):
        if b < a:
            out.append(f"{where}: bucket {hi:g} ({b}) below bucket {lo:g} ({a})")
    if count == 0 and total != 0:
        out.append(f"{where}: sum {total} with count 0")
    return out


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def violations(snap: dict[str, Any]) -> list[str]:
    off = snap.get("offload") or {}
    out: list[str] = []
    host = off.get("host") or {}
    lookups = off.get("lookups") or {}
    misses: Counter[str] = Counter()
    for key, n in (lookups.get("misses") or {}).items():
        misses[miss_reason(key)] += n
    has_misses = "misses" in lookups

    for pressure in ("row", "page"):
        ev = _get(off, "evictions", pressure) or {}
        age, idle = ev.get("age_seconds"), ev.get("idle_seconds")
        for name, hist in (("age_seconds", age), ("idle_seconds", idle)):
            if hist is not None:
                out += histogram_violations(f"evictions.{pressure}.{name}", hist["count"],
                                            hist["sum"], hist["buckets"])
        if age is not None and "evicted" in ev and age["count"] != ev["evicted"]:
            out.append(f"evictions.{pressure}: age_seconds.count {age['count']} != evicted "
                       f"{ev['evicted']}")
        if age is not None and idle is not None:
            if idle["count"] > age["count"]:
                out.append(f"evictions.{pressure}: idle_seconds.count {idle['count']} > "
                           f"age_seconds.count {age['count']}")
            if not _le(idle["sum"], age["sum"]):
                out.append(f"evictions.{pressure}: idle_seconds.sum {idle['sum']} > "
                           f"age_seconds.sum {age['sum']}")

    outcomes = host.get("store_outcomes")
    if outcomes is not None and "stores" in host and outcomes["stored"] != host["stores"]:
        out.append(f"host: store_outcomes.stored {outcomes['stored']} != stores {host['stores']}")
    if outcomes is not None and outcomes["stored"] == 0 and host.get("stored_bytes", 0) != 0:
        out.append(f"host: stored_bytes {host['stored_bytes']} with nothing stored")

    transfers = host.get("restore_transfers")
    if transfers is not None:
        count = transfers["count"]
        out += histogram_violations("host.restore_transfers.seconds", count,
                                    transfers["seconds_sum"], transfers["seconds_buckets"])
        if count == 0 and transfers["bytes"] != 0:
            out.append(f"host.restore_transfers: {transfers['bytes']} bytes in no transfer")
        if "hits" in lookups and count > lookups["hits"]:
            out.append(f"host.restore_transfers: count {count} > lookups.hits {lookups['hits']}")
        restored = host.get("tokens_restored")
        if restored is not None and (count == 0) != (restored == 0):
            out.append(f"host.restore_transfers: count {count} with tokens_restored {restored}")

    prompt = off.get("prompt_tokens")
    if prompt is not None:
        if "tokens_restored" in host and prompt["host_restored"] != host["tokens_restored"]:
            out.append(f"prompt_tokens.host_restored {prompt['host_restored']} != "
                       f"host.tokens_restored {host['tokens_restored']}")
        reused = host.get("prompt_tokens_reused")
        if reused is not None and prompt["gpu_prefix"] + prompt["host_restored"] != reused:
            out.append(f"prompt_tokens.gpu_prefix + host_restored "
                       f"{prompt['gpu_prefix'] + prompt['host_restored']} != "
                       f"host.prompt_tokens_reused {reused}")

    blocked = lookups.get("blocked_tokens")
    if blocked is not None:
        if has_misses:
            for reason, tokens in blocked.items():
                if tokens > 0 and misses[reason] == 0:
                    out.append(f"lookups.blocked_tokens.{reason}: {tokens} tokens, no miss")
        if prompt is not None and sum(blocked.values()) > prompt["computed"]:
            out.append(f"lookups.blocked_tokens: {sum(blocked.values())} tokens > "
                       f"prompt_tokens.computed {prompt['computed']}")
        shortest = _get(off, "geometry", "min_reusable_tokens")
        if has_misses and shortest is not None and \
                blocked.get("too_short", 0) > misses["too_short"] * (shortest - 1):
            out.append(f"lookups.blocked_tokens.too_short {blocked['too_short']} > "
                       f"{misses['too_short']} misses x {shortest - 1} tokens")

    evicted_by = lookups.get("evicted_by")
    if evicted_by is not None and has_misses and sum(evicted_by.values()) != misses["evicted"]:
        out.append(f"lookups.evicted_by: {sum(evicted_by.values())} != evicted misses "
                   f"{misses['evicted']}")

    geometry = off.get("geometry")
    if geometry is not None:
        floor = max(geometry["page_tokens"], geometry["row_checkpoint_interval_tokens"])
        if geometry["min_reusable_tokens"] <= floor:
            out.append(f"geometry: min_reusable_tokens {geometry['min_reusable_tokens']} not "
                       f"above page_tokens and row_checkpoint_interval_tokens ({floor})")
    return out
