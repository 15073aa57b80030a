"""Allow-listed engine families re-exported with `generation` added, e.g.

    # TYPE helios_engine_native_prompt_tokens counter
    helios_engine_native_prompt_tokens_total{generation="g-20261129T0412Z-7f3a"} 8.128902e+06
    # TYPE helios_engine_native_num_running_reqs gauge
    helios_engine_native_num_running_reqs{generation="g-20261129T0412Z-7f3a"} 3.0

Gauges come from this cycle's parse; counters and histograms from the totals folded across
cycles (exporter/cycle/passthrough_totals.py), so they stay counters while engine series come and go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter.cycle.derive import EnginePicture


class PassthroughCollector:
    def __init__(self, engine: Callable[[], EnginePicture]) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        eng = self._engine()
        parsed, gen, native = eng.passthrough, eng.passthrough_generation, eng.native
        if parsed is None or gen is None:
            return  # without a known generation an engine series cannot be tagged
        families = list(parsed.families)
        if native is not None and native.generation == gen:
            families += native.families
        for fam in sorted(families, key=lambda f: f.name):
            metric = Metric(fam.name, fam.help, fam.type)
            for sample_name, labels, value in fam.samples:
                metric.add_sample(sample_name, {"generation": gen, **dict(labels)}, value)
            yield metric
