"""vLLM 0.33.0 (its v1 metrics loggers and the offloading connector's metrics) onto the catalogue.

vLLM's CPU offloading tier counts its traffic in bytes and its prefix reuse in tokens; it has no
slabs and no occupancy: `vllm:kv_offload_cpu_cache_usage_perc` is the share of blocks pinned by
transfers in flight (a full tier reads 0 between transfers), so the slabs stay absent rather
than read from it. The deprecated `vllm:kv_offload_total_bytes{transfer_type}` is read where the
direction-named counters are not exported, onto the same meanings.
"""

from __future__ import annotations

from exporter.engines.model import Mapping, Reader, Row, absent

V = "vllm:"
STORE_BYTES, LOAD_BYTES = V + "kv_offload_store_bytes_total", V + "kv_offload_load_bytes_total"
TOTAL_BYTES = V + "kv_offload_total_bytes_total"  # deprecated, by transfer_type
BY_SOURCE = V + "prompt_tokens_by_source_total"
REQUESTS = V + "request_success_total"
PROMPT = V + "prompt_tokens_total"
NO_SLABS = ("the offloading connector exports no occupancy: kv_offload_cpu_cache_usage_perc is "
            "the share pinned by transfers in flight, not the share in use")
OCCUPANCY_GAP = "gauges of the CPU tier's blocks in use and in total"


def _bytes(r: Reader, name: str, transfer_type: str) -> float | None:
    value = r.total(name)
    return value if value is not None else r.total(TOTAL_BYTES, transfer_type=transfer_type)


def _source(r: Reader, source: str) -> float | None:
    value = r.total(BY_SOURCE, source=source)
    if value is None and r.present(BY_SOURCE):
        return 0.0
    return value


def _reused(r: Reader) -> float | None:
    local, external = _source(r, "local_cache_hit"), _source(r, "external_kv_transfer")
    return None if local is None or external is None else local + external


MAPPING = Mapping("vllm", "0.33.0", (
    absent("slab_capacity.row", "vLLM keeps no recurrent-state pool on the host"),
    absent("slab_free.row", "vLLM keeps no recurrent-state pool on the host"),
    absent("slab_capacity.page", NO_SLABS, OCCUPANCY_GAP),
    absent("slab_free.page", NO_SLABS, OCCUPANCY_GAP),
    absent("slab_record_bytes", "no bytes per offloaded block are exported"),
    absent("budget_bytes", "the CPU tier's size is configuration, not exported",
           "a gauge of the CPU tier's bytes"),
    absent("resident_records", NO_SLABS, OCCUPANCY_GAP),
    absent("resident_bytes", NO_SLABS, OCCUPANCY_GAP),
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
    Row("host_stores", "derived", "bytes", "`vllm:kv_offload_store_bytes_total` (else the "
        "deprecated `kv_offload_total_bytes_total{transfer_type=\"GPU_to_CPU\"}`): vLLM counts "
        "stores in bytes, not in stores", (STORE_BYTES, TOTAL_BYTES),
        lambda r: _bytes(r, STORE_BYTES, "GPU_to_CPU"), gap="a counter of store operations"),
    Row("host_tokens_restored", "native", "tokens", "`vllm:prompt_tokens_by_source_total"
        "{source=\"external_kv_transfer\"}`: prompt tokens loaded through the KV connector",
        (BY_SOURCE,), lambda r: _source(r, "external_kv_transfer")),
    Row("prompt_tokens_reused", "derived", "tokens", "`prompt_tokens_by_source_total` of "
        "source local_cache_hit + external_kv_transfer", (BY_SOURCE,), _reused),
    absent("store_outcomes.stored", "stores are counted in bytes only"),
    absent("store_outcomes.dropped_full", "kv_offload_allocation_failure counts failed "
           "allocations, with no stored count in the same unit to set it against",
           "store outcomes in one unit"),
    absent("store_outcomes.dropped_ineligible", "kv_offload_stores_skipped is not split by why"),
    absent("store_outcomes.failed", "no failed-store counter"),
    Row("stored_bytes", "native", "bytes", "`vllm:kv_offload_store_bytes_total` (else the "
        "deprecated `kv_offload_total_bytes_total{transfer_type=\"GPU_to_CPU\"}`)",
        (STORE_BYTES, TOTAL_BYTES), lambda r: _bytes(r, STORE_BYTES, "GPU_to_CPU")),
    Row("restore_transfer_bytes", "native", "bytes", "`vllm:kv_offload_load_bytes_total` (else "
        "the deprecated `kv_offload_total_bytes_total{transfer_type=\"CPU_to_GPU\"}`)",
        (LOAD_BYTES, TOTAL_BYTES), lambda r: _bytes(r, LOAD_BYTES, "CPU_to_GPU")),
    absent("restore_transfer_seconds", "load time is a counter of seconds, not a histogram of "
           "transfers", "a histogram of load durations"),
    absent("eviction_age_seconds", "no eviction ages are exported"),
    absent("eviction_idle_seconds", "no eviction idle times are exported"),
    absent("lookup_blocked_tokens", "no miss reasons are exported"),
    absent("lookup_evicted_misses", "no miss reasons are exported"),
    Row("prompt_tokens.computed", "native", "tokens", "`vllm:prompt_tokens_by_source_total"
        "{source=\"local_compute\"}`", (BY_SOURCE,), lambda r: _source(r, "local_compute")),
    Row("prompt_tokens.gpu_prefix", "native", "tokens", "`vllm:prompt_tokens_by_source_total"
        "{source=\"local_cache_hit\"}`", (BY_SOURCE,), lambda r: _source(r, "local_cache_hit")),
    Row("prompt_tokens.host_restored", "native", "tokens", "`vllm:prompt_tokens_by_source_total"
        "{source=\"external_kv_transfer\"}`", (BY_SOURCE,),
        lambda r: _source(r, "external_kv_transfer")),
    absent("page_tokens", "the block size is a label of vllm:cache_config_info, not a value"),
    absent("row_checkpoint_interval_tokens", "vLLM keeps no recurrent-state checkpoints"),
    absent("min_reusable_tokens", "not exported"),
    absent("admission", "vllm:engine_sleep_state is sleep, not admission: drain checks are "
           "unknown", "an admission gauge"),
    absent("inflight_requests", "without admission a drain cannot be judged"),
    absent("ranks", "not exported"),
    Row("generation", "derived", "", "from the exposition: process start time, else the "
        "earliest counter `_created`, else a counter reset (docs/engines.md)", (), lambda r: 0.0),
), flags=("--kv-transfer-config '{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":"
          "\"kv_both\",\"kv_connector_extra_config\":{\"num_cpu_blocks\":N}}'",),
   marker=(PROMPT,))
