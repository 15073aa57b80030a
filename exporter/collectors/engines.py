"""What the sidecar reads a mapped engine as (`--engine-kind` other than helios), e.g.

    helios_engine_kind_info{decided="auto",kind="sglang",mapping="sglang-0.5.23"} 1.0
    helios_engine_signal_coverage{signal="slab_free.row",source="derived"} 1.0
    helios_engine_signal_coverage{signal="eviction_attempts",source="absent"} 1.0
    helios_engine_kind_mismatch{found="vllm",kind="sglang"} 1.0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter.collectors.families import gauge
from exporter.engines.state import KindState
from exporter.labels import ENGINE_SIGNALS


class EnginesCollector:
    def __init__(self, state: Callable[[], KindState]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        state = self._state()
        if state.kind is not None:
            info = gauge("helios_engine_kind_info")
            info.add_metric([state.kind, state.decided, state.mapping or ""], 1.0)
            yield info
        if state.coverage:
            coverage = gauge("helios_engine_signal_coverage")
            for signal in ENGINE_SIGNALS:
                if signal in state.coverage:
                    coverage.add_metric([signal, state.coverage[signal]], 1.0)
            yield coverage
        if state.mismatch is not None and state.kind is not None:
            mismatch = gauge("helios_engine_kind_mismatch")
            mismatch.add_metric([state.kind, state.mismatch], 1.0)
            yield mismatch
