"""Allow-listed engine families re-exported with `generation` added, e.g.

    # TYPE helios_engine_native_prompt_tokens counter
    helios_engine_native_prompt_tokens_total{generation="g-20261129T0412Z-7f3a"} 8.128902e+06
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter.derive import EnginePicture


class PassthroughCollector:
    def __init__(self, engine: Callable[[], EnginePicture]) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        eng = self._engine()
        parsed, gen = eng.passthrough, eng.passthrough_generation
        if parsed is None or gen is None:
            return  # without a known generation an engine series cannot be tagged
        for fam in parsed.families:
            metric = Metric(fam.name, fam.help, fam.type)
            for sample_name, labels, value in fam.samples:
                metric.add_sample(sample_name, {"generation": gen, **dict(labels)}, value)
            yield metric
