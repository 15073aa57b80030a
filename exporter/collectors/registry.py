"""Every collector the sidecar serves on /metrics, registered in one place, in exposition order,
and each one run on its own so that one failing collector never fails the scrape.

The sidecar (`sidecar.build`) and the tests (the full golden exposition) both use
`build_registry()`, so what a test renders is what a scrape gets. The engine, restore and health
collectors read the latest published `View`; `http` reads the HTTP server's own counters; the last
three describe the sidecar process itself: build info, and client_python's standard `process_*`
and `python_info` collectors (rather than series of our own that would say the same).

As node_exporter's `execute()` does, every collector is timed and reported after the others:

    helios_exporter_collector_success{collector="offload"} 1.0
    helios_exporter_collector_duration_seconds{collector="offload"} 0.0004

A collector that raises (or yields something that cannot be rendered) contributes nothing but
`..._success 0`; the first time each cause (exception type and where it was raised) is seen it is
logged with its traceback, and its recovery is logged once.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from exporter.collectors.build_info import BuildInfoCollector
from exporter.collectors.engines import EnginesCollector
from exporter.collectors.experiment import ExperimentCollector
from exporter.collectors.exporter_self import ExporterCollector
from exporter.collectors.families import gauge
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.host import HostCollector
from exporter.collectors.offload import OffloadCollector
from exporter.collectors.passthrough import PassthroughCollector
from exporter.collectors.pins import PinCollector
from exporter.collectors.restore import RestoreCollector
from exporter.cycle.view import View
from exporter.engines.state import KindState
from exporter.labels import COLLECTORS
from exporter.restore.window import Bounds

log = structlog.get_logger("helios_exporter.collectors")

Encode = Callable[[list[Metric]], bytes]


@dataclass(frozen=True)
class Health:
    """One collector at the latest run: `cause` names what it raised and where
    (`KeyError at offload.py:120`), never the message (it may quote engine input)."""

    collector: str
    ok: bool
    seconds: float
    cause: str | None = None


class Collectors(CollectorRegistry):
    """A registry whose `collect()` runs each named collector on its own (tests read it with
    `get_sample_value` as any registry); `run(encode)` also renders each one's part of the
    exposition inside its own guard (exporter/collectors/exposition.py)."""

    def __init__(self, timer: Callable[[], float] = time.perf_counter) -> None:
        # auto_describe off: describing would call every collect() once more at registration.
        super().__init__(auto_describe=False)
        self._named: list[tuple[str, Collector]] = []
        self._timer = timer
        self._causes: dict[str, set[str]] = {}  # failing collector -> causes already logged
        self.health: tuple[Health, ...] = ()  # of the latest complete rendering

    def add(self, name: str, collector: Collector) -> None:
        if name not in COLLECTORS:
            raise ValueError(f"collector {name!r} is not in exporter.labels.COLLECTORS")
        self.register(collector)
        self._named.append((name, collector))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self._named)

    def collect(self) -> Iterator[Metric]:
        for metrics, _ in self.run(None):
            yield from metrics

    def run(self, encode: Encode | None) -> Iterator[tuple[list[Metric], bytes]]:
        """Each collector's metric families and (with `encode`) their rendered text, then the
        success and duration families of all of them."""
        health: list[Health] = []
        for name, collector in self._named:
            t0 = self._timer()
            cause = None
            try:
                metrics = list(collector.collect())
                body = encode(metrics) if encode else b""
            except Exception as exc:  # one collector's bug must not cost the others their series
                cause = self._failed(name, exc)
                metrics, body = [], b""
            else:
                if self._causes.pop(name, None) is not None:
                    log.info("collector_recovered", collector=name)
            health.append(Health(name, cause is None, self._timer() - t0, cause))
            yield metrics, body
        families = health_families((h.collector, h.ok, h.seconds) for h in health)
        self.health = tuple(health)
        yield families, encode(families) if encode else b""

    def _failed(self, name: str, exc: Exception) -> str:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        cause = f"{type(exc).__name__} at {where}"
        seen = self._causes.setdefault(name, set())
        if cause not in seen:  # once per cause: a broken collector is not a line per scrape
            seen.add(cause)
            log.error("collector_failed", collector=name, cause=cause,
                      error=str(exc)[:200], exc_info=exc)
        return cause


def health_families(health: Iterable[tuple[str, bool, float]]) -> list[Metric]:
    success = gauge("helios_exporter_collector_success")
    duration = gauge("helios_exporter_collector_duration_seconds")
    for name, ok, took in health:
        success.add_metric([name], 1.0 if ok else 0.0)
        duration.add_metric([name], took)
    return [success, duration]


def build_registry(
    view: Callable[[], View],
    bounds: Bounds,
    *,
    gpu: bool,
    http: Collector | None = None,
    process: Collector | None = None,
    platform: Collector | None = None,
    build_info: Collector | None = None,
    timer: Callable[[], float] = time.perf_counter,
    engines: Callable[[], KindState] | None = None,
) -> Collectors:
    """`gpu`: NVML is polled. `http`: the HTTP server's collector (none in tools that do not
    serve). `process`, `platform` and `build_info` default to this process, this Python and this
    version; tests pass fixed ones (a fake /proc tree, a fake platform), and a fixed `timer`.
    `engines`: the engine kind's state, with --engine-kind other than helios."""
    registry = Collectors(timer)
    registry.add("offload", OffloadCollector(lambda: view().engine, lambda: view().restore.state,
                                             lambda: view().geometry))
    if engines is not None:
        registry.add("engines", EnginesCollector(engines))
    registry.add("pins", PinCollector(lambda: view().pins))
    registry.add("passthrough", PassthroughCollector(lambda: view().engine))
    registry.add("restore", RestoreCollector(lambda: view().restore, bounds))
    registry.add("exporter", ExporterCollector(view))
    registry.add("host", HostCollector(lambda: view().latest.get("host")))
    registry.add("experiment", ExperimentCollector(lambda: view().open_phases))
    if gpu:
        registry.add("gpu", GpuCollector(lambda: view().gpus, lambda: view().engine.snapshot))
    if http is not None:
        registry.add("http", http)
    registry.add("build_info", build_info or BuildInfoCollector())
    registry.add("process", process or ProcessCollector(registry=None))
    registry.add("platform", platform or PlatformCollector(registry=None))
    return registry
