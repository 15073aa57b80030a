"""Small helpers to build fresh metric families with a fixed label order."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


def gauge(name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def counter(name: str, doc: str, labels: Sequence[str] = ()) -> CounterMetricFamily:
    # CounterMetricFamily appends `_total` to the sample name; pass the name without it.
    return CounterMetricFamily(name.removesuffix("_total"), doc, labels=list(labels))
