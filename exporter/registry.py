"""Every collector the sidecar serves on /metrics, registered in one place, in exposition order.

The sidecar (`sidecar.build`) and the tests (the full golden exposition) both use
`build_registry()`, so what a test renders is what a scrape gets. The engine, restore and health
collectors read the latest published `View`; the last three describe the sidecar process itself:
build info, and client_python's standard `process_*` and `python_info` collectors (rather than
series of our own that would say the same).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.registry import Collector

from exporter.collectors.build_info import BuildInfoCollector
from exporter.collectors.experiment import ExperimentCollector
from exporter.collectors.exporter_self import ExporterCollector
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.host import HostCollector
from exporter.collectors.offload import OffloadCollector
from exporter.collectors.passthrough import PassthroughCollector
from exporter.collectors.pins import PinCollector
from exporter.collectors.restore import RestoreCollector
from exporter.restore.window import Bounds
from exporter.view import View


def build_registry(
    view: Callable[[], View],
    bounds: Bounds,
    *,
    gpu: bool,
    process: Collector | None = None,
    platform: Collector | None = None,
    build_info: Collector | None = None,
) -> CollectorRegistry:
    """`gpu`: NVML is polled. `process`, `platform` and `build_info` default to this process,
    this Python and this version; tests pass fixed ones (a fake /proc tree, a fake platform)."""
    # auto_describe off: describing would call every collect() once more at registration.
    registry = CollectorRegistry(auto_describe=False)
    collectors: list[Collector] = [
        OffloadCollector(lambda: view().engine, lambda: view().restore.state),
        PinCollector(lambda: view().pins),
        PassthroughCollector(lambda: view().engine),
        RestoreCollector(lambda: view().restore, bounds),
        ExporterCollector(view),
        HostCollector(lambda: view().latest.get("host")),
        ExperimentCollector(lambda: view().open_phases),
    ]
    if gpu:
        collectors.append(GpuCollector(lambda: view().latest.get("nvml"),
                                       lambda: view().engine.snapshot))
    collectors += [
        build_info or BuildInfoCollector(),
        process or ProcessCollector(registry=None),
        platform or PlatformCollector(registry=None),
    ]
    for collector in collectors:
        registry.register(collector)
    return registry
