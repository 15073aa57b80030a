"""SGLang 0.5.23 (`sglang/srt/observability/metrics_collector.py` of its wheel) onto the catalogue.

The host tier (HiCache, `--enable-hierarchical-cache`) of a hybrid model has two pools, which are
the catalogue's two slabs: the host Mamba state pool is the row slab (records: states), the host
KV pool is the page slab (records: pages of `sglang:page_size` tokens). SGLang counts the host
tier's traffic in tokens, not in store operations, and says of its per-rank token counters that
every TP rank reports the same logical count: those are read from one rank; its byte counters
are each rank's own shard: those are summed. A labelled SGLang counter has no series until its
first increment: where the host tier exists (its pool gauges are exported) a counter of its
traffic without a series is 0, elsewhere absent.
"""

from __future__ import annotations

from exporter.engines.model import Hist, Inconsistent, Mapping, Reader, Row, absent

V = "sglang:"
MAMBA_TOTAL, MAMBA_USED = V + "hicache_host_mamba_total_states", V + "hicache_host_mamba_used_states"
HOST_TOTAL, HOST_USED = V + "hicache_host_total_tokens", V + "hicache_host_used_tokens"
PAGE_SIZE = V + "page_size"
BACKUP_TOKENS, BACKUP_BYTES = V + "hicache_backup_tokens_total", V + "hicache_backup_bytes_total"
LOAD_TOKENS, LOAD_BYTES = V + "load_back_tokens_total", V + "load_back_bytes_total"
LOAD_SECONDS = V + "load_back_duration_seconds"
DROPPED = V + "hicache_dropped_tokens_total"
CACHED, PROMPT = V + "cached_tokens_total", V + "prompt_tokens_total"
REQUESTS = V + "num_requests_total"
NO_EVICTION_CAUSE = ("host-tier evictions by slab pressure, and how they ended, are not counted "
                     "(sglang:evicted_tokens_total is device KV slots freed, in tokens)")


def _pair(r: Reader, total_name: str, used_name: str) -> tuple[float, float] | None:
    total, used = r.one(total_name), r.one(used_name)
    if total is None or used is None:
        return None
    if used > total:
        raise Inconsistent(f"{used_name} {used:g} above {total_name} {total:g}")
    return total, used


def _page_size(r: Reader) -> float | None:
    size = r.one(PAGE_SIZE)
    if size is not None and size < 1:
        raise Inconsistent(f"{PAGE_SIZE} {size:g}")
    return size


def _pages(r: Reader, free: bool) -> float | None:
    size = _page_size(r)
    if not free:
        total = r.one(HOST_TOTAL)
        return None if size is None or total is None else float(total // size)
    pair = _pair(r, HOST_TOTAL, HOST_USED)
    if size is None or pair is None:
        return None
    return float((pair[0] - pair[1]) // size)


def _traffic(r: Reader, name: str, **match: str) -> float | None:
    """A host-tier counter of one rank: 0 while the host tier exists and it has no series."""
    value = r.one(name, **match)
    if value is None and r.present(HOST_TOTAL):
        return 0.0
    return value


def _bytes(r: Reader, name: str) -> float | None:
    value = r.total(name)
    if value is None and r.present(HOST_TOTAL):
        return 0.0
    return value


def _cached(r: Reader, source: str) -> float | None:
    """Prompt tokens served from `source` (device, host): 0 once prompts are counted and none
    came from there (SGLang creates a source's series at its first token)."""
    value = r.total(CACHED, cache_source=source)
    if value is None and r.total(CACHED, cache_source="total") is not None:
        return None  # the engine counts cached tokens without their source
    if value is None and r.total(PROMPT) is not None and (source == "device"
                                                          or r.present(HOST_TOTAL)):
        return 0.0
    return value


def _computed(r: Reader) -> float | None:
    prompt, device, host = r.total(PROMPT), _cached(r, "device"), _cached(r, "host")
    if prompt is None or device is None or host is None:
        return None
    storage = r.total(CACHED, cache_source="storage") or 0.0
    computed = prompt - device - host - storage
    if computed < 0:
        raise Inconsistent(f"cached prompt tokens {prompt - computed:g} above {PROMPT} {prompt:g}")
    return computed


def _reused(r: Reader) -> float | None:
    device, host = _cached(r, "device"), _cached(r, "host")
    return None if device is None or host is None else device + host


def _load_seconds(r: Reader) -> Hist | None:
    return r.histogram(LOAD_SECONDS)


HOST = (HOST_TOTAL,)
MAPPING = Mapping("sglang", "0.5.23", (
    Row("slab_capacity.row", "native", "states", "`sglang:hicache_host_mamba_total_states`: the "
        "host Mamba state pool is the row slab", (MAMBA_TOTAL,), lambda r: r.one(MAMBA_TOTAL)),
    Row("slab_free.row", "derived", "states", "`hicache_host_mamba_total_states` - "
        "`hicache_host_mamba_used_states`", (MAMBA_TOTAL, MAMBA_USED),
        lambda r: None if (p := _pair(r, MAMBA_TOTAL, MAMBA_USED)) is None else p[0] - p[1]),
    Row("slab_capacity.page", "derived", "pages", "`hicache_host_total_tokens` / `page_size` "
        "(whole pages; only where `sglang:page_size` is exported)",
        (HOST_TOTAL, PAGE_SIZE), lambda r: _pages(r, free=False)),
    Row("slab_free.page", "derived", "pages", "(`hicache_host_total_tokens` - "
        "`hicache_host_used_tokens`) / `page_size` (whole pages)",
        (HOST_TOTAL, HOST_USED, PAGE_SIZE), lambda r: _pages(r, free=True)),
    absent("slab_record_bytes", "no bytes per host Mamba state or KV page are exported",
           "a gauge of each host pool's bytes per record"),
    absent("budget_bytes", "the host pools' byte sizes are not exported",
           "a gauge of the host pools' bytes (--hicache-size)"),
    absent("resident_records", "the host pools count tokens and states apart; no total of "
           "records is exported"),
    absent("resident_bytes", "no bytes resident in the host pools are exported",
           "a gauge of host bytes in use"),
    absent("eviction_attempts", NO_EVICTION_CAUSE,
           "host-tier eviction counters by pool (row: Mamba, page: KV)"),
    absent("eviction_outcomes", NO_EVICTION_CAUSE),
    absent("retired_leaves", "the radix tree's leaf retirement is not counted"),
    absent("ancestor_compactions", "no ancestor compaction exists in SGLang's radix cache"),
    Row("lookups", "derived", "requests", "`sglang:num_requests_total`: every request's prompt "
        "is matched against the prefix cache once", (REQUESTS,), lambda r: r.total(REQUESTS)),
    absent("lookup_hits", "hits are counted in tokens (cached_tokens_total), not per lookup",
           "a counter of requests with a host-tier hit"),
    absent("lookup_misses", "no miss reasons are exported", "a miss counter by reason"),
    Row("host_stores", "derived", "tokens", "`sglang:hicache_backup_tokens_total{pool=\"kv\"}` "
        "of one rank: SGLang counts host stores in tokens backed up, not in stores",
        (BACKUP_TOKENS, HOST_TOTAL), lambda r: _traffic(r, BACKUP_TOKENS, pool="kv")),
    Row("host_tokens_restored", "native", "tokens", "`sglang:load_back_tokens_total"
        "{pool=\"kv\"}` of one rank", (LOAD_TOKENS, HOST_TOTAL),
        lambda r: _traffic(r, LOAD_TOKENS, pool="kv")),
    Row("prompt_tokens_reused", "derived", "tokens", "`sglang:cached_tokens_total` of "
        "cache_source device + host", (CACHED, PROMPT, HOST_TOTAL), _reused),
    Row("store_outcomes.stored", "native", "tokens", "`sglang:hicache_backup_tokens_total"
        "{pool=\"kv\"}` of one rank (tokens, not stores)", (BACKUP_TOKENS, HOST_TOTAL),
        lambda r: _traffic(r, BACKUP_TOKENS, pool="kv")),
    Row("store_outcomes.dropped_full", "native", "tokens", "`sglang:hicache_dropped_tokens_total"
        "{reason=\"host_pressure\",pool=\"kv\"}`: tokens dropped because the host tier had no "
        "room", (DROPPED, HOST_TOTAL),
        lambda r: _traffic(r, DROPPED, reason="host_pressure", pool="kv")),
    absent("store_outcomes.dropped_ineligible", "stores refused as never storable are not "
           "counted"),
    Row("store_outcomes.failed", "native", "tokens", "`sglang:hicache_dropped_tokens_total"
        "{reason=\"write_through_unbacked_eviction\",pool=\"kv\"}`: a write-through store "
        "begun but evicted before it completed (write_through policy only)", (DROPPED,),
        lambda r: r.one(DROPPED, reason="write_through_unbacked_eviction", pool="kv")),
    Row("stored_bytes", "native", "bytes", "`sglang:hicache_backup_bytes_total`, every rank's "
        "shard summed", (BACKUP_BYTES, HOST_TOTAL), lambda r: _bytes(r, BACKUP_BYTES)),
    Row("restore_transfer_bytes", "native", "bytes", "`sglang:load_back_bytes_total`, every "
        "rank's shard summed", (LOAD_BYTES, HOST_TOTAL), lambda r: _bytes(r, LOAD_BYTES)),
    Row("restore_transfer_seconds", "native", "seconds", "`sglang:load_back_duration_seconds`, "
        "every rank's merged load-back summed (observed only where CUDA timing events work)",
        (LOAD_SECONDS + "_bucket", LOAD_SECONDS + "_sum", LOAD_SECONDS + "_count"),
        _load_seconds),
    absent("eviction_age_seconds", "no age of evicted host entries is exported"),
    absent("eviction_idle_seconds", "no idle time of evicted host entries is exported"),
    absent("lookup_blocked_tokens", "no miss reasons are exported"),
    absent("lookup_evicted_misses", "no miss reasons are exported"),
    Row("prompt_tokens.computed", "derived", "tokens", "`sglang:prompt_tokens_total` - "
        "`cached_tokens_total` of every cache_source (storage, L3, hits are in no source of "
        "the catalogue)", (PROMPT, CACHED, HOST_TOTAL), _computed),
    Row("prompt_tokens.gpu_prefix", "native", "tokens", "`sglang:cached_tokens_total"
        "{cache_source=\"device\"}`", (CACHED, PROMPT, HOST_TOTAL), lambda r: _cached(r, "device")),
    Row("prompt_tokens.host_restored", "native", "tokens", "`sglang:cached_tokens_total"
        "{cache_source=\"host\"}` (0 while the host tier exists and has served no hit: SGLang "
        "creates the series at the first)", (CACHED, PROMPT, HOST_TOTAL),
        lambda r: _cached(r, "host")),
    Row("page_tokens", "native", "tokens", "`sglang:page_size`", (PAGE_SIZE,), _page_size),
    absent("row_checkpoint_interval_tokens", "Mamba states are kept per radix node, not at a "
           "fixed token interval"),
    absent("min_reusable_tokens", "not exported", "a gauge of the shortest reusable prefix"),
    absent("admission", "no admission state (draining, closed) is exported: drain checks are "
           "unknown", "an admission gauge"),
    absent("inflight_requests", "running and queued requests are exported, but without "
           "admission a drain cannot be judged from them"),
    absent("ranks", "ranks are labels of the engine's series, not a count it states"),
    Row("generation", "derived", "", "from the exposition: process start time, else the "
        "earliest counter `_created`, else a counter reset (exporter/engines/identity.py)"),
), flags=("--enable-metrics", "--enable-hierarchical-cache"), marker=(REQUESTS, PAGE_SIZE))
