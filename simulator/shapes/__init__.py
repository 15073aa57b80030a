"""Engine shapes: another engine's ``/metrics`` families (names, types, label
names and label sets, as that engine version's own code exposes them), for
``simulate --flavor sglang|vllm``. The data modules beside this one are
written from the committed fixtures (tests/fixtures/engines/) by
``python -m tools.engine_fixtures shapes``.

``ShapeCollector`` renders a shape with the values a flavor models
(simulator.flavors) and zeros for the rest; a family the engine creates only
at its first event (``lazy``) stays absent until the flavor gives it a value;
where the engine's counters and histograms carry `_created` samples, they
carry the incarnation's start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample


@dataclass(frozen=True)
class Family:
    name: str
    type: str
    help: str
    labels: tuple[str, ...]
    series: tuple[Mapping[str, str], ...]
    lazy: bool = False
    created: bool = False  # the engine exposes `_created` samples (its registry is not multiprocess)


@dataclass(frozen=True)
class Histogram:
    """A histogram's value: cumulative counts by upper bound (ending at +Inf), and its sum."""

    buckets: tuple[tuple[str, float], ...]
    sum: float

    @classmethod
    def empty(cls) -> Histogram:
        return cls((("+Inf", 0.0),), 0.0)


Value = float | Histogram
Series = tuple[Mapping[str, str], Value]  # label values that differ from the shape's first set


class ShapeCollector(Collector):
    """One engine shape, rendered from ``values()``: family name -> series."""

    def __init__(
        self,
        families: Sequence[Family],
        values: Callable[[], Mapping[str, Sequence[Series]]],
        constants: Mapping[str, str],
        started: Callable[[], float],
    ) -> None:
        self.families = families
        self.values = values
        self.constants = constants  # label values the flavor fixes (model_name, ...)
        self.started = started  # the `_created` time: when this incarnation's series began

    def collect(self) -> Iterator[Metric]:
        given = self.values()
        for family in self.families:
            series = given.get(family.name)
            if series is None:
                if family.lazy:
                    continue
                series = [({**labels}, self._zero(family)) for labels in family.series]
            elif not series and family.lazy:
                continue
            metric = self._metric(family, series)
            if family.created and family.type in ("counter", "histogram"):
                created = self.started()
                metric.samples.extend(Sample(family.name + "_created", s.labels, created)
                                      for s in list(metric.samples)
                                      if s.name.endswith(("_total", "_count")))
            yield metric

    @staticmethod
    def _zero(family: Family) -> Value:
        return Histogram.empty() if family.type == "histogram" else 0.0

    def _labels(self, family: Family, override: Mapping[str, str]) -> list[str]:
        base = {**(family.series[0] if family.series else {}), **override}
        return [self.constants.get(name, base.get(name, "")) for name in family.labels]

    def _metric(self, family: Family, series: Sequence[Series]) -> Metric:
        if family.type == "histogram":
            histogram = HistogramMetricFamily(family.name, family.help, labels=family.labels)
            for override, value in series:
                shown = value if isinstance(value, Histogram) else \
                    Histogram((("+Inf", float(value)),), 0.0)
                histogram.add_metric(self._labels(family, override), list(shown.buckets),
                                     shown.sum)
            return histogram
        metric = (CounterMetricFamily if family.type == "counter" else GaugeMetricFamily)(
            family.name, family.help, labels=family.labels)
        for override, value in series:
            scalar = value.sum if isinstance(value, Histogram) else float(value)
            metric.add_metric(self._labels(family, override), scalar)
        return metric
