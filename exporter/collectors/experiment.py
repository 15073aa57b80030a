"""Experiment phases open now (POST /experiment/phases), for Grafana's phase annotations, e.g.

    # TYPE helios_experiment_phase_open gauge
    helios_experiment_phase_open{phase="probe-52/forward-1"} 1.0
    # TYPE helios_experiment_phase_start_timestamp_seconds gauge
    helios_experiment_phase_start_timestamp_seconds{phase="probe-52/forward-1"} 1.7643895205e+09

Nothing is exported while no phase is open. `phase` is bounded: a name is accepted only when it
matches exporter.labels.PHASE_NAME_PATTERN, at most MAX_OPEN_PHASES are open at once, and an ended
phase leaves the exposition (its figures are in GET /experiment/phases, not in Prometheus).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import Metric

from exporter.collectors.families import gauge


class ExperimentCollector:
    def __init__(self, open_phases: Callable[[], Mapping[str, float]]) -> None:
        self._open_phases = open_phases

    def collect(self) -> Iterator[Metric]:
        phases = self._open_phases()
        if not phases:
            return
        is_open = gauge("helios_experiment_phase_open")
        start = gauge("helios_experiment_phase_start_timestamp_seconds")
        for name, began in sorted(phases.items()):
            is_open.add_metric([name], 1.0)
            start.add_metric([name], began)
        yield is_open
        yield start
