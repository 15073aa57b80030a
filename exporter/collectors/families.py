"""Fresh metric families built from their catalogue rows (exporter/catalogue/): a collector names
the family, the catalogue gives its type, labels (in the order of `add_metric`'s values) and HELP.
A name the catalogue lacks, or a row of another type, raises: no family leaves without a row."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from exporter import catalogue
from exporter.catalogue.model import Family, HistogramSamples, Samples

K = TypeVar("K", str, tuple[str, str])


def _row(name: str, kind: str) -> tuple[list[str], str]:
    """The row's labels and HELP."""
    row = catalogue.get(name)
    if row.type != kind or row.help is None:
        raise TypeError(f"{name} is not a {kind} of ours in the catalogue ({row.type}, "
                        f"{row.collector})")
    return list(row.labels), row.help


def gauge(name: str) -> GaugeMetricFamily:
    labels, doc = _row(name, "gauge")
    return GaugeMetricFamily(name, doc, labels=labels)


def counter(name: str) -> CounterMetricFamily:
    labels, doc = _row(name, "counter")
    # CounterMetricFamily appends `_total` to the sample name; pass the name without it.
    return CounterMetricFamily(name.removesuffix("_total"), doc, labels=labels)


def histogram(name: str) -> HistogramMetricFamily:
    labels, doc = _row(name, "histogram")
    return HistogramMetricFamily(name, doc, labels=labels)


def family(row: Family) -> GaugeMetricFamily | CounterMetricFamily:
    return gauge(row.name) if row.type == "gauge" else counter(row.name)


def render(row: Family, samples: Samples, *first: str) -> Metric:
    """The row's family with one sample per entry of `samples` (label values after `first`)."""
    m = family(row)
    for values, value in samples.items():
        m.add_metric([*first, *values], value)
    return m


def render_histogram(row: Family, samples: HistogramSamples, *first: str) -> Metric:
    """The histogram row's family, one histogram per entry of `samples`."""
    m = histogram(row.name)
    for values, h in samples.items():
        m.add_metric([*first, *values], buckets=list(h.buckets),
                     sum_value=h.sum)
    return m


def zero_filled(keys: Iterable[K], counts: Mapping[K, int]) -> list[tuple[K, int]]:
    """Every key of a closed set at 0 unless counted, plus any counted key outside it; sorted.

    For counters whose labels come from a closed set: exported at 0 from the start, so that
    `increase()` sees the first event."""
    out: dict[K, int] = dict.fromkeys(keys, 0)
    out.update(counts)
    return sorted(out.items())
