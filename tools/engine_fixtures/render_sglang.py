"""SGLang 0.5.23's own metric collectors, driven through a hybrid model with
a host tier (HiCache): run in a fresh process (``python -m
tools.engine_fixtures.render_sglang OUT``), since the collectors must import
prometheus_client after PROMETHEUS_MULTIPROC_DIR is set, as SGLang does.

Imported from the wheel: sglang/srt/observability/metrics_collector.py (the
scheduler, tokenizer and radix-cache collectors), observability/utils.py,
scheduler_stage_metrics.py, utils/gauge_histogram.py, utils/nvtx_utils.py,
environ.py. Stubbed: torch (GPU), the runtime context (a running server's
published configuration; filled from the wheel's own field defaults) and the
modules whose only use here is an enum or a type name (read from the wheel's
source, not rewritten).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import tempfile
import types
from enum import Enum, IntEnum, auto
from pathlib import Path
from typing import Any

from tools.engine_fixtures import wheels
from tools.engine_fixtures.stubs import Stubbed, definitions, literal_defaults

MEMBERS = ("sglang/",)
MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"
PAGE_SIZE = 64
HOST_TOKENS = 1_048_576
HOST_STATES = 512
FIXED_PID = 4242


def _install(root: Path, stubbed: Stubbed) -> None:
    srt = root / "sglang" / "srt"
    stubbed.module("sglang", "the frontend language API (sglang/__init__.py), not metrics",
                   path=root / "sglang")
    stubbed.module("torch", "GPU runtime", profiler=types.SimpleNamespace())
    stubbed.module("torch.distributed", "GPU runtime")
    utils_ns: dict[str, Any] = {"os": os, "logger": logging.getLogger("sglang"),
                                "_warned_bool_env_var_keys": set()}
    stubbed.module(
        "sglang.srt.utils",
        "utils/__init__.py imports utils/common.py (torch, zmq, ...); "
        "get_bool_env_var is read from common.py's source",
        path=srt / "utils",
        **definitions(srt / "utils" / "common.py", ("get_bool_env_var",), utils_ns),
    )
    stubbed.module(
        "sglang.srt.disaggregation.utils",
        "imports torch.distributed; DisaggregationMode is read from its source",
        **definitions(srt / "disaggregation" / "utils.py", ("DisaggregationMode",),
                      {"Enum": Enum}),
    )
    stubbed.module(
        "sglang.srt.model_executor.forward_batch_info",
        "imports torch; ForwardMode is read from its source",
        **definitions(srt / "model_executor" / "forward_batch_info.py", ("ForwardMode",),
                      {"IntEnum": IntEnum, "auto": auto}),
    )
    stubbed.module("sglang.srt.server_args", "a type name only here", ServerArgs=object)
    fields = srt / "arg_groups" / "fields"

    def bag(path: str, name: str, **values: Any) -> types.SimpleNamespace:
        return types.SimpleNamespace(**{**literal_defaults(fields / path, name), **values})

    observability = bag("observability.py", "Observability", enable_metrics=True,
                        stat_loggers=None)
    schedule = bag("schedule.py", "Schedule")
    serving = bag("serving.py", "Serving", served_model_name=MODEL)
    disagg = bag("disagg.py", "Disagg")
    parallel = types.SimpleNamespace(tp_rank=0, pp_rank=0, moe_ep_rank=0, dp_rank=None,
                                     attn_tp_rank=0, attn_cp_rank=0, attn_dp_rank=0)
    context = types.SimpleNamespace(is_config_namespace_published=lambda name: False)
    stubbed.module(
        "sglang.srt.runtime_context",
        "a running server's published configuration; the wheel's field defaults "
        "(arg_groups/fields/*.py) with --enable-metrics and a served model name",
        get_context=lambda: context,
        get_observability=lambda: observability,
        get_schedule=lambda: schedule,
        get_serving=lambda: serving,
        get_disagg=lambda: disagg,
        get_parallel=lambda: parallel,
        exports_expert_balancedness_to_prometheus=lambda: False,
    )


def _scheduler_labels(mc: Any) -> dict[str, Any]:
    engine_type = mc.DisaggregationMode.to_engine_type(
        sys.modules["sglang.srt.runtime_context"].get_disagg().disaggregation_mode
    )
    # As SchedulerMetricsCollector.init_new builds them (tp=1, no DP attention).
    return {"model_name": MODEL, "engine_type": engine_type, "tp_rank": 0,
            "pp_rank": 0, "moe_ep_rank": 0}


def _stats(mc: Any, step: int, host_used: int, host_states: int) -> Any:
    kv_total = 2_000_000
    kv_used = 150_000 + 10_000 * step
    kv_evictable = 600_000 + 20_000 * step
    mamba_total = 1_024
    mamba_used = 96 + step
    stats = mc.SchedulerStats(
        num_running_reqs=mc.QueueCount(total=24), num_queue_reqs=mc.QueueCount(total=3),
        gen_throughput=2_150.0, cache_hit_rate=0.42,
        token_usage=max(kv_used / kv_total, mamba_used / mamba_total),
        full_token_usage=kv_used / kv_total, mamba_usage=mamba_used / mamba_total,
        num_used_tokens=kv_used, kv_used_tokens=kv_used, kv_evictable_tokens=kv_evictable,
        kv_available_tokens=kv_total - kv_used - kv_evictable,
        mamba_used_tokens=mamba_used, mamba_evictable_tokens=200,
        mamba_available_tokens=mamba_total - mamba_used - 200,
        utilization=0.81, new_token_ratio=0.4,
        hicache_host_used_tokens=host_used, hicache_host_total_tokens=HOST_TOKENS,
        hicache_host_mamba_used_states=host_states,
        hicache_host_mamba_total_states=HOST_STATES,
    )
    return stats


def _finish(tok: Any, labels: dict[str, Any], device: int, host: int) -> None:
    tok.observe_one_finished_request(
        labels, prompt_tokens=4_096, generation_tokens=256, cached_tokens=device + host,
        e2e_latency=3.2, has_grammar=False,
        cached_tokens_details={"device": device, "host": host}, time_per_output_token=0.012,
    )
    tok.observe_time_to_first_token(labels, 0.41, stream=True)


def _http(http: Any) -> None:
    http.requests_total.labels(endpoint="/v1/completions", method="POST").inc()
    http.responses_total.labels(endpoint="/v1/completions", method="POST",
                                status_code="200").inc()
    active = http.requests_active.labels(endpoint="/v1/completions", method="POST")
    active.inc()
    active.dec()


STEPS = (
    ("01-startup", "collectors created, constants emitted, host tier empty; "
                   "the dropped-tokens series pre-seeded at 0 as the cache does at init"),
    ("02-stores-without-reuse", "host KV and host Mamba pools filling, backups steady "
                                "for both pools, evictions, cached tokens from the device "
                                "only, load-backs never happened (their series absent)"),
    ("03-reuse-from-host", "load-backs for both pools begin, cached tokens from the host, "
                           "drops under host pressure, host pools near full"),
)


def scenario(mc: Any, http: Any, write: Any) -> dict[str, Any]:
    """Drive the collectors; ``write(step)`` captures the exposition."""
    ctx = mc.SchedulerMetricsCollector.init_new(
        server_args=None, enable_priority_scheduling=False, enable_lora=False,
        enable_hierarchical_cache=True,
    )
    sched = ctx.collector
    tok = mc.TokenizerMetricsCollector(server_args=None, labels=mc.tokenizer_metric_labels())
    runtime = sys.modules["sglang.srt.runtime_context"]
    radix = mc.RadixCacheMetricsCollector(labels=mc.radix_cache_metric_labels(
        "UnifiedRadixCache", runtime.get_parallel(), False))
    radix.increment_dropped_tokens(num_tokens=0, reason="host_pressure", pool="kv")
    sched.emit_constants(
        max_total_num_tokens=2_000_000, max_total_num_tokens_swa=None,
        weight_memory_usage_gb=149.2, kv_cache_memory_usage_gb=38.5,
        graph_memory_usage_gb={"decode": 1.3}, max_running_requests_under_SLO=None,
        page_size=PAGE_SIZE, num_pages=2_000_000 // PAGE_SIZE, context_len=262_144,
        startup_available_gpu_memory_gb=188.0,
    )
    tok.emit_startup_time({"load_weight": 41.0, "kv_cache_allocation": 3.5,
                           "scheduler_e2e": 58.0, "tokenizer_e2e": 61.0,
                           "cuda_graph": {"decode": 12.0}})
    sched.log_stats(_stats(mc, 0, 0, 0))
    write(STEPS[0])
    labels = dict(tok.labels)
    for step in range(1, 11):
        radix.increment_backup_num_tokens(num_tokens=32_700, pool="kv")
        radix.increment_backup_num_tokens(num_tokens=8, pool="mamba")
        radix.increment_backup_num_bytes(32_700 * 49_152)
        radix.observe_backup_duration(0.012)
        radix.increment_eviction_num_tokens(16_384)
        radix.observe_eviction_duration(0.004)
        _finish(tok, labels, device=2_048, host=0)
        _http(http)
        sched.log_stats(_stats(mc, step, 32_700 * step, 8 * step))
    write(STEPS[1])
    for step in range(11, 16):
        radix.increment_backup_num_tokens(num_tokens=32_700, pool="kv")
        radix.increment_backup_num_tokens(num_tokens=8, pool="mamba")
        radix.increment_backup_num_bytes(32_700 * 49_152)
        radix.increment_load_back_num_tokens(num_tokens=12_288, pool="kv")
        radix.increment_load_back_num_tokens(num_tokens=3, pool="mamba")
        radix.increment_load_back_num_bytes(12_288 * 49_152)
        radix.observe_load_back_duration(0.006)
        radix.increment_eviction_num_tokens(32_768)
        radix.increment_dropped_tokens(num_tokens=1_024, reason="host_pressure", pool="kv")
        _finish(tok, labels, device=1_024, host=2_048)
        _http(http)
        host_used = min(HOST_TOKENS - PAGE_SIZE * 16, 32_700 * step * 2)
        sched.log_stats(_stats(mc, step, host_used, min(HOST_STATES - 4, 30 * step)))
    write(STEPS[2])
    return {"SchedulerMetricsCollector": sched, "TokenizerMetricsCollector": tok,
            "RadixCacheMetricsCollector": radix, "http_request_metrics": http}


def defined_families(collectors: dict[str, Any]) -> list[dict[str, Any]]:
    """Every family the collectors created, whether or not it has a sample."""
    from prometheus_client.metrics import MetricWrapperBase

    found: dict[str, dict[str, Any]] = {}
    for owner, collector in collectors.items():
        for value in vars(collector).values():
            metric = getattr(value, "_gauge", value)  # GaugeHistogram, RefCountedGauge
            if isinstance(metric, MetricWrapperBase) and metric._name not in found:
                found[metric._name] = {
                    "name": metric._name, "type": metric._type,
                    "labels": sorted(metric._labelnames), "help": metric._documentation,
                    "defined_by": owner,
                }
    return sorted(found.values(), key=lambda family: family["name"])


IMPORTED = [
    "sglang/srt/observability/http_request_metrics.py",
    "sglang/srt/observability/metrics_collector.py",
    "sglang/srt/observability/utils.py",
    "sglang/srt/observability/scheduler_stage_metrics.py",
    "sglang/srt/utils/gauge_histogram.py",
    "sglang/srt/utils/nvtx_utils.py",
    "sglang/srt/environ.py",
]


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    # SGLang's launcher sets this before prometheus_client is imported
    # (utils/common.py set_prometheus_multiproc_dir); /metrics then reads
    # every process's files (add_prometheus_middleware).
    multiproc = tempfile.TemporaryDirectory(prefix="sglang-prom-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiproc.name
    root = wheels.extract(wheels.SGLANG, MEMBERS, suffix=".py")
    msgspec_root = wheels.extract(wheels.MSGSPEC, ("msgspec/",))
    sys.path[:0] = [str(root), str(msgspec_root)]
    stubbed = Stubbed()
    _install(root, stubbed)
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess, values

    # Gauges in multiprocess mode "all" carry the writer's pid: a fixed one
    # keeps re-rendered fixtures comparable (prometheus_client's own hook).
    values.ValueClass = values.MultiProcessValue(lambda: FIXED_PID)  # type: ignore[no-untyped-call]
    # By name: the engine is not a dependency of this repository.
    http = importlib.import_module("sglang.srt.observability.http_request_metrics")
    mc = importlib.import_module("sglang.srt.observability.metrics_collector")

    http.init_http_request_metrics()

    expositions: list[tuple[tuple[str, str], str]] = []

    def capture(step: tuple[str, str]) -> None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        expositions.append((step, generate_latest(registry).decode()))

    collectors = scenario(mc, http._http_request_metrics, capture)
    from tools.engine_fixtures import output

    output.write(
        out, engine="sglang", wheel=wheels.SGLANG, expositions=expositions,
        defined=defined_families(collectors), stubbed=stubbed.modules, imported=IMPORTED,
        served_by="prometheus_client multiprocess mode: a CollectorRegistry with a "
                  "MultiProcessCollector over PROMETHEUS_MULTIPROC_DIR "
                  "(sglang/srt/utils/common.py add_prometheus_middleware)",
        extra_wheels=(wheels.MSGSPEC,),
    )
    multiproc.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
