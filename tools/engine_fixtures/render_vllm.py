"""vLLM 0.33.0's own Prometheus stat logger and KV offloading metrics, driven
through a model served with the CPU offloading connector: run in a fresh
process (``python -m tools.engine_fixtures.render_vllm OUT``).

Imported from the wheel: vllm/v1/metrics/loggers.py (PrometheusStatLogger),
stats.py, prometheus.py, utils.py, cache_hit_source.py, buckets.py,
v1/spec_decode/metrics.py, kv_connector/v1/metrics.py,
kv_connector/v1/offloading/metrics.py, v1/kv_offload/{base,factory}.py,
v1/kv_offload/cpu/{spec,common,manager}.py, v1/simple_kv_offload/metrics.py,
envs.py, logger.py. Stubbed: torch and the GPU side (attention, model
executor, CUDA graphs, parallel state, platforms, the GPU offload worker),
the engine's configuration objects (a running server's; filled from the
wheel's own field defaults), and third-party libraries this repository does
not install that no metric definition uses (cbor2, zmq, regex).
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

from tools.engine_fixtures import wheels
from tools.engine_fixtures.stubs import Stubbed, definitions, literal_defaults, methods

MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"
GIB = 1 << 30
CONNECTOR = "vllm/distributed/kv_transfer/kv_connector/v1"
GPU_SIDE = {
    "vllm.platforms": "the accelerator platform (CUDA, ROCm, ...)",
    "vllm.model_executor": "model code and its torch layers",
    "vllm.v1.attention": "attention backends (GPU kernels)",
    "vllm.compilation.cuda_graph": "CUDA graphs (the cudagraph metrics are off by default)",
    "vllm.distributed.parallel_state": "torch.distributed process groups",
    "vllm.utils.torch_utils": "torch helpers",
    "vllm.v1.kv_offload.cpu.gpu_worker": "the GPU side of the CPU offload (copies)",
    "vllm.multimodal": "multimodal inputs (torch)",
    "vllm.v1.core.sched.output": "the scheduler's batch output (a running scheduler)",
}
PACKAGES = {
    "vllm": "vllm/__init__.py patches torch at import (env_override)",
    "vllm.distributed": "its __init__ sets up torch.distributed communication",
    "vllm.distributed.ec_transfer": "its __init__ imports the encoder-cache connectors (GPU)",
    f"{CONNECTOR.replace('/', '.')}": "its __init__ imports every connector class (GPU side)",
    "vllm.config": "a running server's configuration (VllmConfig imports the model "
                   "stack); the logger gets a namespace of the wheel's field defaults",
}


def _install(root: Path, stubbed: Stubbed) -> dict[str, Any]:
    stubbed.absent({
        "torch": "GPU runtime",
        "cbor2": "not installed here: the engine's hashing serialiser, no metric uses it",
        "zmq": "not installed here: the engine's IPC, no metric uses it",
        "regex": "not installed here: tokenizer patterns, no metric uses it",
    })
    for name, reason in {**PACKAGES, **GPU_SIDE}.items():
        folder = root / name.replace(".", "/")
        stubbed.module(name, reason, names=True,
                       path=folder if folder.is_dir() else None)
    engine_init = root / "vllm" / "v1" / "engine" / "__init__.py"
    stubbed.module(
        "vllm.v1.engine",
        "request and output structs (torch, openai types); FinishReason and "
        "FINISH_REASON_STRINGS are read from its source",
        path=engine_init.parent, names=True,
        **definitions(engine_init, ("FinishReason", "FINISH_REASON_STRINGS"),
                      {"enum": importlib.import_module("enum")}),
    )
    hooks: dict[str, Any] = {}
    stubbed.module(
        "vllm.distributed.kv_transfer.kv_connector.factory",
        "resolves the connector class, whose module imports the GPU worker; the "
        "class's two metric hooks are read from its source",
        names=True, KVConnectorFactory=types.SimpleNamespace(
            get_connector_class=lambda config: hooks[config.kv_connector]),
    )
    stubbed.module("vllm.distributed.ec_transfer.ec_connector.factory",
                   "encoder-cache connectors (off here)", names=True)
    return hooks


HOOKS = ("build_kv_connector_stats", "build_prom_metrics")


def _config(root: Path, connector: str, extra: dict[str, Any]) -> Any:
    fields = root / "vllm" / "config"
    cache_cls = methods(fields / "cache.py", "CacheConfig", ("metrics_info",), {})
    cache = cache_cls()
    cache.__dict__.update({**literal_defaults(fields / "cache.py", "CacheConfig"),
                           "block_size": 64, "num_gpu_blocks": 31_250,
                           "num_cpu_blocks": None})
    observability = types.SimpleNamespace(
        **literal_defaults(fields / "observability.py", "ObservabilityConfig"),
        show_hidden_metrics=False,  # a property of the version flag, unset
    )
    return types.SimpleNamespace(
        observability_config=observability, cache_config=cache,
        model_config=types.SimpleNamespace(served_model_name=MODEL, max_model_len=262_144,
                                           is_diffusion=False),
        kv_transfer_config=types.SimpleNamespace(
            kv_connector=connector, kv_role="kv_both", is_kv_consumer=False,
            is_kv_producer=True, kv_connector_extra_config=extra),
        speculative_config=None, ec_transfer_config=None, watermark_config=None,
        lora_config=None,
    )


STEPS = (
    ("01-startup", "the stat logger created with the CPU offloading connector, the cache "
                   "config info set, the offload tier's config info reported, engine awake"),
    ("02-stores-without-loads", "stores to the CPU tier steady (bytes, time, sizes), some "
                                "stores skipped, device prefix-cache hits, connector "
                                "lookups that never hit, no loads yet"),
    ("03-loads-and-failures", "loads from the CPU tier begin, host cache hits by source, "
                              "allocation failures, transfers pinning the CPU cache"),
    ("04-simple-cpu-connector", "a fresh stat logger with the SimpleCPUOffloadConnector: "
                                "save outcomes by reason, load blocks, used and pending "
                                "blocks, its info series"),
)


def _offload_payload(m: dict[str, Any], step: int, loads: bool) -> dict[str, Any]:
    stats = m["OffloadingConnectorStats"]()
    names, cpu = m["_TransferMetricName"], m["CPUOffloadingMetrics"]
    if step == 0:
        info = m["CPUOffloadingInfo"](cpu_num_chunks=4_096, cpu_blocks_per_chunk=1,
                                      cpu_kv_cache_size_bytes=64 * GIB,
                                      cpu_kv_cache_size_tokens=262_144)
        stats.set_info([info.as_config_info()])
        return stats.data  # type: ignore[no-any-return]
    stats.increase_counter(names.STORE_BYTES, 48 * (1 << 20))
    stats.increase_counter(names.STORE_TIME, 0.004)
    stats.observe_histogram(names.STORE_SIZE, 48 * (1 << 20))
    stats.increase_counter(cpu.STORES_SKIPPED, 2)
    stats.observe_histogram(cpu.CPU_ALLOCATION_SIZE, 16)
    stats.set_gauge(cpu.CPU_CACHE_USAGE_PERC, 0.05 if not loads else 0.31)
    stats.set_gauge(cpu.CPU_CACHE_WRITE_USAGE_PERC, 0.05)
    stats.set_gauge(cpu.CPU_CACHE_READ_USAGE_PERC, 0.0 if not loads else 0.26)
    stats.observe_histogram(m["_ConnectorMetricName"].LOOKUP_SYNC_DELAY, 0.0002)
    if loads:
        stats.increase_counter(names.LOAD_BYTES, 32 * (1 << 20))
        stats.increase_counter(names.LOAD_TIME, 0.003)
        stats.observe_histogram(names.LOAD_SIZE, 32 * (1 << 20))
        stats.increase_counter(m["_ConnectorMetricName"].ALLOCATION_FAILURE, 1)
    return stats.data  # type: ignore[no-any-return]


def _scheduler_stats(m: dict[str, Any], step: int, loads: bool, payload: Any) -> Any:
    prefix = m["PrefixCacheStats"]()
    prefix.record(num_tokens=4_096, num_hits=1_024, preempted=False)
    connector = m["PrefixCacheStats"]()
    host = m["CacheHitSource"].HOST
    connector.record(num_tokens=3_072, num_hits=2_048 if loads else 0, preempted=False,
                     hits_by_source={host: 2_048} if loads else None)
    return m["SchedulerStats"](
        num_running_reqs=24, num_waiting_reqs=3, kv_cache_usage=0.02 + 0.04 * step,
        prefix_cache_stats=prefix, connector_prefix_cache_stats=connector,
        kv_connector_stats=payload,
    )


def scenario(m: dict[str, Any], root: Path, hooks: dict[str, Any], write: Any) -> None:
    hooks["OffloadingConnector"] = methods(
        root / CONNECTOR / "offloading_connector.py", "OffloadingConnector", HOOKS,
        {**m, "Any": Any})
    logger = m["PrometheusStatLogger"](_config(root, "OffloadingConnector", {
        # store_threshold >= 2 is what defines the skipped-stores counter
        "cpu_bytes_to_use": 64 * GIB, "block_size": 64, "store_threshold": 2}), [0])
    logger.log_engine_initialized()
    logger.record(_scheduler_stats(m, 0, False, _offload_payload(m, 0, False)), None)
    write(STEPS[0])
    for step in range(1, 6):
        logger.record(_scheduler_stats(m, step, False, _offload_payload(m, step, False)), None)
    write(STEPS[1])
    for step in range(6, 9):
        logger.record(_scheduler_stats(m, step, True, _offload_payload(m, step, True)), None)
    write(STEPS[2])
    simple = m["simple_metrics"]
    hooks["SimpleCPUOffloadConnector"] = methods(
        root / CONNECTOR / "simple_cpu_offload_connector.py", "SimpleCPUOffloadConnector",
        HOOKS, {**m, **vars(simple), "Any": Any})
    logger = m["PrometheusStatLogger"](_config(root, "SimpleCPUOffloadConnector", {
        "cpu_bytes_to_use": 64 * GIB}), [0])
    logger.log_engine_initialized()
    stats = simple.SimpleCPUOffloadStats()
    for outcome, count in (("stored", 120), ("dropped_cpu_full", 6),
                           ("skipped_already_cached", 40)):
        stats.increase_counter(simple.MetricName.SAVE_OUTCOMES, count, (outcome,))
    stats.increase_counter(simple.MetricName.LOAD_BLOCKS, 30)
    stats.set_gauge(simple.MetricName.USED_BLOCKS, 3_900)
    stats.set_gauge(simple.MetricName.PENDING_STORE_BLOCKS, 8)
    # as the manager labels it (simple_kv_offload/manager.py)
    stats.set_gauge(simple.MetricName.INFO, 1, ("cpu", "false", "false", "4096"))
    logger.record(_scheduler_stats(m, 1, True, stats.data), None)
    write(STEPS[3])


MODULES = {
    "PrometheusStatLogger": "vllm.v1.metrics.loggers",
    "SchedulerStats": "vllm.v1.metrics.stats",
    "PrefixCacheStats": "vllm.v1.metrics.stats",
    "CacheHitSource": "vllm.v1.metrics.cache_hit_source",
    "get_prometheus_registry": "vllm.v1.metrics.prometheus",
    "OffloadingConnectorStats": f"{CONNECTOR.replace('/', '.')}.offloading.metrics",
    "OffloadPromMetrics": f"{CONNECTOR.replace('/', '.')}.offloading.metrics",
    "_TransferMetricName": f"{CONNECTOR.replace('/', '.')}.offloading.metrics",
    "_ConnectorMetricName": f"{CONNECTOR.replace('/', '.')}.offloading.metrics",
    "KVConnectorStats": f"{CONNECTOR.replace('/', '.')}.metrics",
    "KVConnectorPromMetrics": f"{CONNECTOR.replace('/', '.')}.metrics",
    "PromMetric": f"{CONNECTOR.replace('/', '.')}.metrics",
    "PromMetricT": f"{CONNECTOR.replace('/', '.')}.metrics",
    "CPUOffloadingMetrics": "vllm.v1.kv_offload.cpu.common",
    "CPUOffloadingInfo": "vllm.v1.kv_offload.cpu.common",
}


def _families(registry: Any, seen: dict[str, dict[str, Any]], owner: str) -> None:
    from prometheus_client.metrics import MetricWrapperBase

    for collector in list(registry._collector_to_names):
        if isinstance(collector, MetricWrapperBase):
            rows = [(collector._name, collector._type, sorted(collector._labelnames),
                     collector._documentation)]
        else:  # prometheus_client's default process, platform and gc collectors
            rows = [(f.name, f.type, sorted({k for s in f.samples for k in s.labels}),
                     f.documentation) for f in collector.collect()]
            owner_here = f"prometheus_client {type(collector).__name__} (REGISTRY default)"
        for name, kind, labels, doc in rows:
            if name not in seen:
                seen[name] = {"name": name, "type": kind, "labels": labels, "help": doc,
                              "defined_by": owner if isinstance(collector, MetricWrapperBase)
                              else owner_here}


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    root = wheels.extract(wheels.VLLM, ("vllm/",), suffix=".py")
    msgspec_root = wheels.extract(wheels.MSGSPEC, ("msgspec/",))
    sys.path[:0] = [str(root), str(msgspec_root)]
    stubbed = Stubbed()
    hooks = _install(root, stubbed)
    from prometheus_client import generate_latest

    m = {name: getattr(importlib.import_module(module), name)
         for name, module in MODULES.items()}
    m["simple_metrics"] = importlib.import_module("vllm.v1.simple_kv_offload.metrics")
    registry = m["get_prometheus_registry"]()  # REGISTRY: one API server, no multiproc dir
    expositions: list[tuple[tuple[str, str], str]] = []
    seen: dict[str, dict[str, Any]] = {}
    owners = iter(("PrometheusStatLogger with OffloadingConnector (CPUOffloadingSpec)",) * 3
                  + ("PrometheusStatLogger with SimpleCPUOffloadConnector",))

    def capture(step: tuple[str, str]) -> None:
        _families(registry, seen, next(owners))
        expositions.append((step, generate_latest(registry).decode()))

    scenario(m, root, hooks, capture)
    from tools.engine_fixtures import output

    output.write(
        out, engine="vllm", wheel=wheels.VLLM, expositions=expositions,
        defined=sorted(seen.values(), key=lambda family: family["name"]),
        stubbed=stubbed.modules, imported=IMPORTED,
        served_by="prometheus_client's global REGISTRY (vllm/v1/metrics/prometheus.py "
                  "get_prometheus_registry with one API server; more than one switches "
                  "to multiprocess mode, without _created samples)",
        extra_wheels=(wheels.MSGSPEC,),
    )
    return 0


IMPORTED = sorted({module.replace(".", "/") + ".py" for module in MODULES.values()}
                  | {"vllm/v1/simple_kv_offload/metrics.py", "vllm/v1/metrics/utils.py",
                     "vllm/v1/metrics/perf.py", "vllm/v1/spec_decode/metrics.py",
                     "vllm/v1/kv_offload/cpu/spec.py", "vllm/v1/kv_offload/factory.py",
                     "vllm/envs.py", "vllm/logger.py"})


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
