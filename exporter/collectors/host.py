"""Engine process and host memory from the latest host poll, e.g.

    helios_engine_process_up 1.0
    helios_engine_process_resident_bytes 2.147483648e+09
    helios_engine_process_cpu_seconds_total 1234.5
    helios_engine_process_threads 97.0
    helios_engine_process_start_time_seconds 1.76438952e+09
    helios_host_memory_available_bytes 4.1e+11
    helios_host_memory_total_bytes 5.4e+11

The engine series appear only when a pid file or process name is configured; `..._up` is 0 when
the process is not found. No pid label: a changed start time is the restart evidence. Values are
polled in the background (every poll interval), not read at scrape time. The sidecar's own process
is client_python's standard `process_*` series (exporter/collectors/registry.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter.collectors.families import counter, gauge
from exporter.sources.base import Result
from exporter.sources.host import HostReport, ProcessStats


class HostCollector:
    def __init__(self, latest: Callable[[], Result[HostReport] | None]) -> None:
        self._latest = latest

    def collect(self) -> Iterator[Metric]:
        result = self._latest()
        report = None if result is None else result.value
        if report is None:
            return
        for name, value in (
            ("helios_host_memory_available_bytes", report.memory_available_bytes),
            ("helios_host_memory_total_bytes", report.memory_total_bytes),
        ):
            if value is not None:
                m = gauge(name)
                m.add_metric([], value)
                yield m
        if report.engine_up is not None:
            m = gauge("helios_engine_process_up")
            m.add_metric([], 1.0 if report.engine_up else 0.0)
            yield m
        if report.engine is not None:
            yield from _process(report.engine)
            m = gauge("helios_engine_process_threads")
            m.add_metric([], report.engine.threads)
            yield m
            m = gauge("helios_engine_process_start_time_seconds")
            m.add_metric([], report.engine.start_time_seconds)
            yield m


def _process(stats: ProcessStats) -> Iterator[Metric]:
    rss = gauge("helios_engine_process_resident_bytes")
    rss.add_metric([], stats.resident_bytes)
    cpu = counter("helios_engine_process_cpu_seconds_total")
    cpu.add_metric([], stats.cpu_seconds)
    yield from (rss, cpu)
