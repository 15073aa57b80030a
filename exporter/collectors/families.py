"""Small helpers to build fresh metric families with a fixed label order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

K = TypeVar("K", str, tuple[str, str])


def gauge(name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def counter(name: str, doc: str, labels: Sequence[str] = ()) -> CounterMetricFamily:
    # CounterMetricFamily appends `_total` to the sample name; pass the name without it.
    return CounterMetricFamily(name.removesuffix("_total"), doc, labels=list(labels))


def zero_filled(keys: Iterable[K], counts: Mapping[K, int]) -> list[tuple[K, int]]:
    """Every key of a closed set at 0 unless counted, plus any counted key outside it; sorted.

    For counters whose labels come from a closed set: exported at 0 from the start, so that
    `increase()` sees the first event."""
    out: dict[K, int] = dict.fromkeys(keys, 0)
    out.update(counts)
    return sorted(out.items())
