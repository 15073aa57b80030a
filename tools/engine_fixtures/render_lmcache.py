"""LMCache 0.5.6's own Prometheus logger (lmcache/observability.py:
PrometheusLogger, fed by LMCStatsMonitor), driven through a CPU offload that
stores, then serves hits: run in a fresh process (``python -m
tools.engine_fixtures.render_lmcache OUT``). LMCache registers in
prometheus_client's multiprocess mode (PrometheusLogger sets
PROMETHEUS_MULTIPROC_DIR): the exposition is a MultiProcessCollector's.

Stubbed: torch (GPU runtime; the metadata's dtype is a placeholder), the
package's __init__ and lmcache/v1/platform (device detection, GPU), and
cpuinfo, aiohttp and cachetools (not installed here; no metric uses them).
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.engine_fixtures import wheels
from tools.engine_fixtures.stubs import Stubbed

MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"
FIXED_PID = 4242
STEPS = (
    ("01-startup", "the logger created for one worker, a first (empty) logging interval"),
    ("02-stores-without-hits", "store requests finished, lookups that never hit, the "
                               "local CPU cache filling, prompt tokens counted"),
    ("03-hits-and-evictions", "lookups that hit, retrieves from the CPU cache, vLLM hit "
                              "tokens, CPU evictions"),
)


def _install(root: Path, stubbed: Stubbed) -> None:
    stubbed.absent({
        "torch": "GPU runtime",
        "cpuinfo": "not installed here: CPU feature detection, no metric uses it",
        "aiohttp": "not installed here: the HTTP client of remote backends, no metric uses it",
        "cachetools": "not installed here: caches, no metric uses it",
    })
    stubbed.module("lmcache", "lmcache/__init__.py detects the GPU platform at import",
                   names=True, path=root / "lmcache")
    stubbed.module("lmcache.v1.platform", "device detection (GPU)", names=True,
                   path=root / "lmcache" / "v1" / "platform")


def _interval(monitor: Any, step: int, hits: bool) -> None:
    for _ in range(4):
        lookup = monitor.on_lookup_request(4_096)
        monitor.on_lookup_finished(lookup, 2_048 if hits else 0)
        store = monitor.on_store_request(2_048)
        monitor.on_store_finished(store, 2_048)
        monitor.update_interval_prompt_tokens(4_096)
        if hits:
            retrieve = monitor.on_retrieve_request(2_048)
            monitor.on_retrieve_finished(retrieve, 2_048)
            monitor.update_interval_vllm_hit_tokens(2_048)
    monitor.update_local_cache_usage(step * 512 * (1 << 20))
    if hits:
        monitor.update_local_cpu_evict_metrics(16)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    multiproc = tempfile.TemporaryDirectory(prefix="lmcache-prom-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiproc.name
    root = wheels.extract(wheels.LMCACHE, ("lmcache/",), suffix=".py")
    sys.path[:0] = [str(root), str(wheels.extract(wheels.MSGSPEC, ("msgspec/",)))]
    stubbed = Stubbed()
    _install(root, stubbed)
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess, values

    values.ValueClass = values.MultiProcessValue(lambda: FIXED_PID)  # type: ignore[no-untyped-call]
    observability = importlib.import_module("lmcache.observability")
    metadata_cls = importlib.import_module("lmcache.v1.metadata").LMCacheMetadata
    metadata = metadata_cls(model_name=MODEL, world_size=1, local_world_size=1, worker_id=0,
                            local_worker_id=0, kv_dtype="bfloat16",
                            kv_shape=(48, 2, 256, 8, 128), role="worker",
                            served_model_name=MODEL)
    logger = observability.PrometheusLogger.GetOrCreate(metadata)
    monitor = observability.LMCStatsMonitor.GetOrCreate()
    expositions: list[tuple[tuple[str, str], str]] = []

    def capture(step: tuple[str, str]) -> None:
        logger.log_prometheus(monitor.get_stats_and_clear())
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        expositions.append((step, generate_latest(registry).decode()))

    capture(STEPS[0])
    for step in range(1, 4):
        _interval(monitor, step, hits=False)
        logger.log_prometheus(monitor.get_stats_and_clear())
    capture(STEPS[1])
    for step in range(4, 7):
        _interval(monitor, step, hits=True)
        logger.log_prometheus(monitor.get_stats_and_clear())
    capture(STEPS[2])
    from prometheus_client.metrics import MetricWrapperBase

    from tools.engine_fixtures import output

    defined = {m._name: {"name": m._name, "type": m._type, "labels": sorted(m._labelnames),
                         "help": m._documentation, "defined_by": "PrometheusLogger"}
               for m in [*vars(logger).values(), *logger._dynamic_gauge_collectors.values()]
               if isinstance(m, MetricWrapperBase)}
    output.write(
        out, engine="lmcache", wheel=wheels.LMCACHE, expositions=expositions,
        defined=sorted(defined.values(), key=lambda family: family["name"]),
        stubbed=stubbed.modules,
        imported=["lmcache/observability.py", "lmcache/v1/metadata.py", "lmcache/utils.py",
                  "lmcache/logging.py", "lmcache/usage_telemetry/__init__.py"],
        served_by="prometheus_client multiprocess mode (PrometheusLogger sets "
                  "PROMETHEUS_MULTIPROC_DIR): a MultiProcessCollector's registry",
        extra_wheels=(wheels.MSGSPEC,),
    )
    multiproc.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
