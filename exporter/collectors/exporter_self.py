"""The sidecar's own health: per-source up/errors/freshness and its cost on the engine, e.g.

    helios_exporter_source_up{source="engine_snapshot"} 1.0
    helios_exporter_source_errors_total{reason="timeout",source="engine_snapshot"} 2.0
    helios_exporter_engine_requests_total{outcome="ok",path="snapshot"} 120.0

Counters whose labels come from a closed set are exported at 0 for every value of the set (a
source's from its first poll on), so that `increase()` sees the first error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter import logs
from exporter.collectors.families import counter, gauge, zero_filled
from exporter.cycle.view import View
from exporter.labels import DROPPABLE_FIELDS, ENGINE_PATHS, ERROR_REASONS, FETCH_OUTCOMES, SOURCES
from exporter.sources.engine_metrics import DEFAULT_ALLOW


class ExporterCollector:
    def __init__(self, view: Callable[[], View]) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        p = self._view()
        yield from _sources(p)
        reqs = counter("helios_exporter_engine_requests_total")
        closed = [(path, outcome) for path in ENGINE_PATHS for outcome in FETCH_OUTCOMES]
        for (path, outcome), value in zero_filled(closed, p.engine_requests):
            reqs.add_metric([path, outcome], value)
        size = counter("helios_exporter_engine_response_bytes_total")
        for path, value in zero_filled(ENGINE_PATHS, p.engine_response_bytes):
            size.add_metric([path], value)
        yield from (reqs, size)
        eng = p.engine
        dropped = counter("helios_exporter_engine_labels_dropped_total")
        for family, value in zero_filled(DEFAULT_ALLOW, eng.labels_dropped):
            dropped.add_metric([family], value)
        yield dropped
        fields = counter("helios_exporter_snapshot_fields_dropped_total")
        for name, value in zero_filled(DROPPABLE_FIELDS, eng.fields_dropped):
            fields.add_metric([name], value)
        yield fields
        for name, value in (
            ("helios_exporter_engine_malformed_lines_total", eng.malformed_lines),
            ("helios_exporter_snapshot_regressions_total", eng.counter_decreases),
            ("helios_exporter_poll_cycles_total", p.cycles),
            ("helios_exporter_log_lines_dropped_total", logs.dropped()),
        ):
            c = counter(name)
            c.add_metric([], value)
            yield c
        if p.last_cycle_duration is not None:
            m = gauge("helios_exporter_poll_cycle_duration_seconds")
            m.add_metric([], p.last_cycle_duration)
            yield m
        if p.polled_at is not None:
            m = gauge("helios_exporter_poll_last_timestamp_seconds")
            m.add_metric([], p.polled_at)
            yield m


def _sources(p: View) -> Iterator[Metric]:
    up = gauge("helios_exporter_source_up")
    errors = counter("helios_exporter_source_errors_total")
    last = gauge("helios_exporter_source_last_success_timestamp_seconds")
    duration = gauge("helios_exporter_source_poll_duration_seconds")
    for source in SOURCES:
        health = p.sources[source]
        if not health.enabled or health.up is None:
            continue
        up.add_metric([source], 1.0 if health.up else 0.0)
        for reason, value in zero_filled(ERROR_REASONS, health.errors):
            errors.add_metric([source, reason], value)
        if health.last_success is not None:
            last.add_metric([source], health.last_success)
        if health.last_duration is not None:
            duration.add_metric([source], health.last_duration)
    yield from (up, errors, last, duration)
