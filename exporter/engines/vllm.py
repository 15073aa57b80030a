"""vLLM 0.33.0 (its v1 metrics loggers, the KV connector and offloading metrics) onto the catalogue.

Two CPU offloading connectors export different families. The OffloadingConnector counts its
traffic in bytes and operations and states its tier's size. It has no occupancy:
`vllm:kv_offload_cpu_cache_usage_perc` is the share of blocks pinned by transfers in flight (a
full tier reads 0 between transfers), so no slab is read from it. The SimpleCPU connector
exports its blocks in use and their capacity, which are the page slab, and its store outcomes.
The deprecated `vllm:kv_offload_total_bytes{transfer_type}` is read where the direction-named
counters are not exported, onto the same meanings. Prompt tokens by the tier that supplied them
(`prompt_tokens_cached_by_source`) are created at 0 for every tier at start.
"""

from __future__ import annotations

from exporter.engines.model import Inconsistent, Mapping, Reader, Row, absent

V = "vllm:"
STORE_BYTES, LOAD_BYTES = V + "kv_offload_store_bytes_total", V + "kv_offload_load_bytes_total"
TOTAL_BYTES = V + "kv_offload_total_bytes_total"  # deprecated, by transfer_type
STORE_OPS, LOAD_OPS = V + "kv_offload_store_size_count", V + "kv_offload_load_size_count"
CONFIG = V + "kv_offload_config_info"
CACHE_CONFIG = V + "cache_config_info"
BY_SOURCE = V + "prompt_tokens_by_source_total"
CACHED = V + "prompt_tokens_cached_by_source_total"
REQUESTS = V + "request_success_total"
PROMPT = V + "prompt_tokens_total"
SIMPLE_INFO, SIMPLE_USED = V + "simple_kv_offload_info", V + "simple_kv_offload_used_blocks"
SIMPLE_SAVES = V + "simple_kv_offload_save_outcomes_total"
NO_OCCUPANCY = ("the OffloadingConnector exports no occupancy: kv_offload_cpu_cache_usage_perc "
                "is the share pinned by transfers in flight, not the share in use")
OCCUPANCY_GAP = "gauges of the OffloadingConnector's CPU blocks in use and in total"
CACHE_SOURCES = ("device", "host", "disk", "p2p", "external_unspecified")


def _bytes(r: Reader, name: str, transfer_type: str) -> float | None:
    value = r.total(name)
    return value if value is not None else r.total(TOTAL_BYTES, transfer_type=transfer_type)


def _simple_blocks(r: Reader, free: bool) -> float | None:
    capacity = r.label(SIMPLE_INFO, "capacity_blocks")
    if capacity is None or not free:
        return capacity
    used = r.total(SIMPLE_USED)
    if used is None:
        return None
    if used > capacity:
        raise Inconsistent(f"{SIMPLE_USED} {used:g} above capacity_blocks {capacity:g}")
    return capacity - used


def _stores(r: Reader) -> float | None:
    ops = r.total(STORE_OPS)
    return ops if ops is not None else r.total(SIMPLE_SAVES, outcome="stored")


def _reused(r: Reader) -> float | None:
    values = [r.total(CACHED, source=s) for s in CACHE_SOURCES]
    return None if values[0] is None else sum(v or 0.0 for v in values)


MAPPING = Mapping("vllm", "0.33.0", (
    absent("slab_capacity.row", "vLLM keeps no recurrent-state pool on the host"),
    absent("slab_free.row", "vLLM keeps no recurrent-state pool on the host"),
    Row("slab_capacity.page", "derived", "blocks", "SimpleCPU connector: `capacity_blocks` of "
        "`vllm:simple_kv_offload_info`; absent with the OffloadingConnector (" + NO_OCCUPANCY
        + ")", (SIMPLE_INFO,), lambda r: _simple_blocks(r, free=False), gap=OCCUPANCY_GAP),
    Row("slab_free.page", "derived", "blocks", "SimpleCPU connector: `capacity_blocks` - "
        "`vllm:simple_kv_offload_used_blocks`; absent with the OffloadingConnector",
        (SIMPLE_INFO, SIMPLE_USED), lambda r: _simple_blocks(r, free=True), gap=OCCUPANCY_GAP),
    absent("slab_record_bytes", "no bytes per offloaded block are exported"),
    Row("budget_bytes", "derived", "bytes", "`cpu_kv_cache_size_bytes` of "
        "`vllm:kv_offload_config_info` (OffloadingConnector)", (CONFIG,),
        lambda r: r.label(CONFIG, "cpu_kv_cache_size_bytes")),
    absent("resident_records", NO_OCCUPANCY, OCCUPANCY_GAP),
    absent("resident_bytes", NO_OCCUPANCY, OCCUPANCY_GAP),
    absent("eviction_attempts", "no eviction counter of the CPU tier by pressure",
           "an eviction counter of the offloading manager"),
    absent("eviction_outcomes", "no eviction counter of the CPU tier"),
    absent("retired_leaves", "not a vLLM concept"),
    absent("ancestor_compactions", "not a vLLM concept"),
    Row("lookups", "derived", "requests", "`vllm:request_success_total`, every finish reason: "
        "each finished request looked its prompt up at least once (a lower bound)", (REQUESTS,),
        lambda r: r.total(REQUESTS)),
    absent("lookup_hits", "prefix hits are counted in tokens (prefix_cache_hits), not lookups",
           "a counter of requests with a prefix hit"),
    absent("lookup_misses", "no miss reasons are exported", "a miss counter by reason"),
    Row("host_stores", "derived", "stores", "`vllm:kv_offload_store_size_count` (one per store "
        "operation; OffloadingConnector), else `simple_kv_offload_save_outcomes_total"
        "{outcome=\"stored\"}` (SimpleCPU connector)", (STORE_OPS, SIMPLE_SAVES), _stores),
    Row("host_tokens_restored", "native", "tokens", "`vllm:prompt_tokens_cached_by_source_total"
        "{source=\"host\"}`: prefix tokens the host tier supplied", (CACHED,),
        lambda r: r.total(CACHED, source="host")),
    Row("prompt_tokens_reused", "derived", "tokens", "`prompt_tokens_cached_by_source_total` of "
        "every source (device, host, disk, p2p, external_unspecified)", (CACHED,), _reused),
    Row("store_outcomes.stored", "native", "stores", "SimpleCPU connector: "
        "`vllm:simple_kv_offload_save_outcomes_total{outcome=\"stored\"}`", (SIMPLE_SAVES,),
        lambda r: r.total(SIMPLE_SAVES, outcome="stored"),
        gap="store outcomes of the OffloadingConnector"),
    Row("store_outcomes.dropped_full", "native", "stores", "SimpleCPU connector: "
        "`simple_kv_offload_save_outcomes_total{outcome=\"dropped_cpu_full\"}` "
        "(kv_offload_allocation_failure of the OffloadingConnector has no stored count beside "
        "it)", (SIMPLE_SAVES,), lambda r: r.total(SIMPLE_SAVES, outcome="dropped_cpu_full")),
    absent("store_outcomes.dropped_ineligible", "kv_offload_stores_skipped is not split by why"),
    absent("store_outcomes.failed", "no failed-store counter"),
    Row("stored_bytes", "native", "bytes", "`vllm:kv_offload_store_bytes_total` (else the "
        "deprecated `kv_offload_total_bytes_total{transfer_type=\"GPU_to_CPU\"}`)",
        (STORE_BYTES, TOTAL_BYTES), lambda r: _bytes(r, STORE_BYTES, "GPU_to_CPU")),
    Row("restore_transfer_bytes", "native", "bytes", "`vllm:kv_offload_load_bytes_total` (else "
        "the deprecated `kv_offload_total_bytes_total{transfer_type=\"CPU_to_GPU\"}`)",
        (LOAD_BYTES, TOTAL_BYTES), lambda r: _bytes(r, LOAD_BYTES, "CPU_to_GPU")),
    absent("restore_transfer_seconds", "load time is a counter of seconds (kv_offload_load_time), "
           "not a histogram of transfers", "a histogram of load durations"),
    absent("eviction_age_seconds", "no eviction ages are exported"),
    absent("eviction_idle_seconds", "no eviction idle times are exported"),
    absent("lookup_blocked_tokens", "no miss reasons are exported"),
    absent("lookup_evicted_misses", "no miss reasons are exported"),
    Row("prompt_tokens.computed", "native", "tokens", "`vllm:prompt_tokens_by_source_total"
        "{source=\"local_compute\"}`", (BY_SOURCE,), lambda r: r.total(BY_SOURCE,
                                                                       source="local_compute")),
    Row("prompt_tokens.gpu_prefix", "native", "tokens", "`vllm:prompt_tokens_cached_by_source_"
        "total{source=\"device\"}`", (CACHED,), lambda r: r.total(CACHED, source="device")),
    Row("prompt_tokens.host_restored", "native", "tokens", "`vllm:prompt_tokens_cached_by_source_"
        "total{source=\"host\"}`", (CACHED,), lambda r: r.total(CACHED, source="host")),
    Row("page_tokens", "derived", "tokens", "`block_size` of `vllm:cache_config_info`",
        (CACHE_CONFIG,), lambda r: r.label(CACHE_CONFIG, "block_size")),
    absent("row_checkpoint_interval_tokens", "not exported"),
    absent("min_reusable_tokens", "not exported"),
    absent("admission", "vllm:engine_sleep_state is sleep, not admission: drain checks are "
           "unknown", "an admission gauge"),
    absent("inflight_requests", "running and waiting requests are exported, but without "
           "admission a drain cannot be judged from them"),
    absent("ranks", "not exported"),
    Row("generation", "derived", "", "from the exposition: process start time, else the "
        "earliest counter `_created`, else a counter reset (exporter/engines/identity.py)"),
), flags=("--kv-transfer-config '{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":"
          "\"kv_both\",\"kv_connector_extra_config\":{\"num_cpu_blocks\":N}}'",),
   marker=(PROMPT,))
