"""``simulate --flavor``: the engine's ``/metrics`` in Helios's shape (the
default), or in SGLang 0.5.23's or vLLM 0.33.0's (simulator.shapes), from the
same simulated engine and scenarios. The engine-shaped flavors serve no
snapshot (``/debug/offload/snapshot`` answers 404), as those engines have none.

What each shape's modelled families read from the simulated engine:

SGLang (HiCache on a hybrid model): the row slab is the host Mamba pool
(``hicache_host_mamba_{total,used}_states``: records), the page slab the host
KV pool (``hicache_host_{total,used}_tokens``: records x ``page_size``, the
simulator's tokens per page); ``hicache_backup_tokens_total`` counts completed
stores (pool ``kv``: the stored pages' tokens; ``mamba``: one state per
store), ``load_back_tokens_total`` restores (``kv``: restored tokens;
``mamba``: one state each) and appears at the first one, as SGLang's does,
with ``load_back_{bytes_total,duration_seconds}`` (the restores' modelled copies);
``hicache_dropped_tokens_total{reason="host_pressure"}`` the stores dropped for
want of room (a page's tokens each); ``evicted_tokens_total`` the host tier's
evictions (a page's tokens each: the simulator has no device pool);
``cached_tokens_total`` the reused prompt tokens by source (a source's series
appears at its first token). Requests and latency come from the engine's own
counters. The families the simulator does not model are exposed at zero.

vLLM (the CPU offloading connector): stores and loads (``kv_offload_*``:
bytes, seconds, sizes; and the deprecated ``kv_offload_total_*`` by transfer
type), allocation failures (stores dropped for want of room), skipped stores
(stores a prompt too short could not make), the share of the CPU cache pinned
by stores in flight (reads: 0, a restore is not in flight), allocations (one
per store, its pages), lookups (timed at 0), finished requests (by length),
prefix-cache queries and hits (device) and the connector's (host), and cached
prompt tokens by source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest

from simulator.shapes import Family, Histogram, Series, ShapeCollector
from simulator.shapes import sglang_0_5_23 as sglang_shape
from simulator.shapes import vllm_0_33_0 as vllm_shape

if TYPE_CHECKING:
    from simulator.engine import SimulatedEngine

FLAVORS = ("helios", "sglang", "vllm")
DEFAULT_FLAVOR = "helios"
SHAPES: dict[str, Sequence[Family]] = {
    "sglang": sglang_shape.FAMILIES, "vllm": vllm_shape.FAMILIES,
}
VERSIONS = {"sglang": sglang_shape.VERSION, "vllm": vllm_shape.VERSION}
Values = dict[str, list[Series]]


class _Counts:
    """What the simulated engine has done, in the units both shapes need."""

    def __init__(self, engine: SimulatedEngine) -> None:
        stats, geometry = engine.stats, engine.pool.geometry
        self.page_tokens = engine.config.tokens_per_page
        self.stores = stats.host_stores
        self.stored_bytes = stats.stored_bytes
        page_bytes = max(0, stats.stored_bytes - stats.host_stores * geometry.row_record_bytes)
        self.stored_pages = page_bytes // geometry.page_record_bytes
        self.restores = stats.restore_seconds.count
        self.restored_tokens = stats.tokens_restored
        self.restore_bytes = stats.restore_bytes
        self.restore_seconds = stats.restore_seconds.sum
        self.restore_histogram = Histogram(
            tuple((le, float(n)) for le, n in stats.restore_seconds.buckets().items()),
            stats.restore_seconds.sum)
        self.store_seconds = stats.stored_bytes / engine.config.latency.host_bytes_per_s
        self.lookups = stats.lookups
        self.dropped_full = stats.dropped_full
        self.dropped_ineligible = stats.dropped_ineligible
        self.evicted = sum(stats.evictions(p).evicted for p in ("row", "page"))
        self.device_hits = stats.prompt_gpu_prefix
        self.host_hits = stats.prompt_host_restored
        self.prompt = stats.prompt_computed + stats.prompt_tokens_reused
        registry = engine.metrics.registry
        model = {"model_name": engine.config.model_name}
        self.generated = registry.get_sample_value("helios:generation_tokens_total", model) or 0.0
        self.requests = registry.get_sample_value("helios:num_requests_total", model) or 0.0
        self.latency = _histogram(registry, "helios:e2e_request_latency_seconds", model)
        self.running = float(engine.running)
        self.budget = geometry.budget_bytes
        # the bytes of the stores in flight (the index's pending stores: record bytes first)
        in_flight = sum(entry[0] for entry in engine.index._pending.values())
        self.pinned = in_flight / self.budget if self.budget else 0.0


def _histogram(registry: CollectorRegistry, name: str, labels: Mapping[str, str]) -> Histogram:
    buckets = []
    for metric in registry.collect():
        for sample in metric.samples:
            if sample.name == name + "_bucket" and all(
                    sample.labels.get(k) == v for k, v in labels.items()):
                buckets.append((sample.labels["le"], sample.value))
    total = registry.get_sample_value(name + "_sum", dict(labels)) or 0.0
    return Histogram(tuple(buckets) or Histogram.empty().buckets, total)


def _one(value: float | Histogram, **labels: str) -> list[Series]:
    return [(labels, value)]


def _positive(pairs: Sequence[tuple[Mapping[str, str], float]]) -> list[Series]:
    return [(labels, value) for labels, value in pairs if value > 0]


def sglang_values(engine: SimulatedEngine) -> Values:
    c, pool = _Counts(engine), engine.pool
    tokens = c.page_tokens
    return {
        "sglang:page_size": _one(tokens),
        "sglang:hicache_host_total_tokens": _one(pool.page.capacity * tokens),
        "sglang:hicache_host_used_tokens": _one(pool.page.used * tokens),
        "sglang:hicache_host_mamba_total_states": _one(pool.row.capacity),
        "sglang:hicache_host_mamba_used_states": _one(pool.row.used),
        "sglang:hicache_backup_tokens": [({"pool": "kv"}, c.stored_pages * tokens),
                                         ({"pool": "mamba"}, c.stores)],
        "sglang:hicache_backup_bytes": _one(c.stored_bytes),
        "sglang:load_back_tokens": _positive([({"pool": "kv"}, c.restored_tokens),
                                              ({"pool": "mamba"}, c.restores)]),
        "sglang:load_back_bytes": _positive([({}, c.restore_bytes)]),
        "sglang:load_back_duration_seconds": [({}, c.restore_histogram)] if c.restores else [],
        "sglang:hicache_dropped_tokens": _one(c.dropped_full * tokens, reason="host_pressure",
                                              pool="kv"),
        "sglang:evicted_tokens": _one(c.evicted * tokens),
        "sglang:cached_tokens": _positive([({"cache_source": "device"}, c.device_hits),
                                           ({"cache_source": "host"}, c.host_hits)]),
        "sglang:prompt_tokens": _one(c.prompt, is_streaming="false"),
        "sglang:generation_tokens": _one(c.generated, is_streaming="false"),
        "sglang:num_requests": _one(c.requests, is_streaming="false"),
        "sglang:num_running_reqs": _one(c.running),
        "sglang:cache_hit_rate": _one((c.device_hits + c.host_hits) / c.prompt if c.prompt
                                      else 0.0),
        "sglang:e2e_request_latency_seconds": _one(c.latency, is_streaming="false"),
    }


def vllm_values(engine: SimulatedEngine) -> Values:
    c = _Counts(engine)
    store_size = Histogram((("+Inf", float(c.stores)),), float(c.stored_bytes))
    load_size = Histogram((("+Inf", float(c.restores)),), float(c.restore_bytes))
    return {
        "vllm:num_requests_running": _one(c.running),
        "vllm:prompt_tokens": _one(c.prompt),
        "vllm:generation_tokens": _one(c.generated),
        # the simulated requests end at their max_tokens
        "vllm:request_success": [({"finished_reason": reason}, c.requests if reason == "length"
                                  else 0.0)
                                 for reason in ("stop", "length", "abort", "error", "repetition")],
        "vllm:prefix_cache_queries": _one(c.prompt),
        "vllm:prefix_cache_hits": _one(c.device_hits),
        "vllm:external_prefix_cache_queries": _one(c.prompt - c.device_hits),
        "vllm:external_prefix_cache_hits": _one(c.host_hits),
        "vllm:prompt_tokens_cached_by_source": [
            ({"source": "device"}, c.device_hits), ({"source": "host"}, c.host_hits),
            ({"source": "p2p"}, 0.0), ({"source": "disk"}, 0.0),
            ({"source": "external_unspecified"}, 0.0)],
        "vllm:e2e_request_latency_seconds": _one(c.latency),
        "vllm:kv_offload_store_bytes": _positive([({}, c.stored_bytes)]),
        "vllm:kv_offload_store_time": _positive([({}, c.store_seconds)]),
        "vllm:kv_offload_store_size": [({}, store_size)] if c.stores else [],
        "vllm:kv_offload_load_bytes": _positive([({}, c.restore_bytes)]),
        "vllm:kv_offload_load_time": _positive([({}, c.restore_seconds)]),
        "vllm:kv_offload_load_size": [({}, load_size)] if c.restores else [],
        "vllm:kv_offload_total_bytes": [({"transfer_type": "CPU_to_GPU"}, c.restore_bytes),
                                        ({"transfer_type": "GPU_to_CPU"}, c.stored_bytes)],
        "vllm:kv_offload_total_time": [({"transfer_type": "CPU_to_GPU"}, c.restore_seconds),
                                       ({"transfer_type": "GPU_to_CPU"}, c.store_seconds)],
        "vllm:kv_offload_allocation_failure": _positive([({}, c.dropped_full)]),
        "vllm:kv_offload_stores_skipped": _positive([({}, c.dropped_ineligible)]),
        "vllm:kv_offload_cpu_cache_usage_perc": _one(c.pinned) if c.stores else [],
        "vllm:kv_offload_cpu_cache_write_usage_perc": _one(c.pinned) if c.stores else [],
        "vllm:kv_offload_cpu_cache_read_usage_perc": _one(0.0) if c.stores else [],
        "vllm:kv_offload_cpu_allocation_size": [({}, Histogram(
            (("+Inf", float(c.stores)),), float(c.stored_pages)))] if c.stores else [],
        "vllm:kv_offload_lookup_sync_delay_seconds": [({}, Histogram(
            (("1e-05", float(c.lookups)), ("+Inf", float(c.lookups))), 0.0))]
        if c.lookups else [],
    }


MODELLED: dict[str, Callable[[SimulatedEngine], Values]] = {
    "sglang": sglang_values, "vllm": vllm_values,
}


def renderer(flavor: str, engine: SimulatedEngine) -> Callable[[], bytes]:
    """The ``/metrics`` body for a flavor: the engine's own for helios, else its shape
    (read at each call, so a restarted incarnation is followed)."""
    if flavor == DEFAULT_FLAVOR:
        def own() -> bytes:  # engine.metrics is each incarnation's own
            return engine.metrics.render()

        return own
    families, modelled = SHAPES[flavor], MODELLED[flavor]

    def render() -> bytes:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(ShapeCollector(
            families, lambda: modelled(engine),
            {"model_name": engine.config.model_name}, lambda: engine.started_at))
        return generate_latest(registry)

    return render
