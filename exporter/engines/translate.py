"""An engine's exposition through its mapping into the part of the snapshot's `offload` section
it can honestly fill, and nothing else: the catalogue's rows then read it as they read Helios's
(every collector, dashboard and alert unchanged), and a signal the engine lacks has no field, so
its family is absent, never 0.

Pure: no I/O, no clock. A signal whose values contradict each other, or are negative or not
finite, is left out and named in `dropped` (its field path, counted as
helios_exporter_snapshot_fields_dropped_total{field}); the other signals stand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from exporter.engines.exposition import Exposition
from exporter.engines.model import Hist, How, Inconsistent, Mapping, Reader, Value
from exporter.engines.signals import BY_NAME, Signal
from exporter.snapshot_v3 import histogram_problem


@dataclass(frozen=True, slots=True)
class Translated:
    fields: dict[str, Any]  # the `offload` section's fields, as the schema names them
    coverage: dict[str, How]  # every signal: how this engine supplies it now
    dropped: dict[str, str]  # field path (`offload.slabs.page.free`) -> why


def field_path(signal: Signal) -> str:
    return f"offload.{signal.path}"


def translate(mapping: Mapping, exp: Exposition) -> Translated:
    fields: dict[str, Any] = {}
    coverage: dict[str, How] = {}
    dropped: dict[str, str] = {}
    for row in mapping.rows:
        signal = BY_NAME[row.signal]
        if signal.path is None or row.read is None:  # the generation (identity.py), or absent
            coverage[row.signal] = row.how
            continue
        try:
            value = row.read(Reader(exp, row.families))
            if value is not None:
                _check(value)
        except Inconsistent as exc:
            coverage[row.signal] = row.how
            dropped[field_path(signal)] = str(exc)
            continue
        if value is None:
            coverage[row.signal] = "absent"
            continue
        coverage[row.signal] = row.how
        _put(fields, signal.path.split("."), value)
    return Translated(fields, coverage, dropped)


def _check(value: Value) -> None:
    numbers = ([value] if isinstance(value, float | int)
               else [value.sum, value.count, *value.buckets.values()])
    bad = next((n for n in numbers if not math.isfinite(n) or n < 0), None)
    if bad is not None:
        raise Inconsistent(f"value {bad:g}")
    if isinstance(value, Hist):
        if "+Inf" not in value.buckets:
            raise Inconsistent("histogram without a +Inf bucket")
        problem = histogram_problem(_histogram(value), "count", "seconds_sum", "seconds_buckets")
        if problem is not None:
            raise Inconsistent(problem)


def _histogram(h: Hist) -> dict[str, Any]:
    return {"count": h.count, "seconds_sum": h.sum, "seconds_buckets": dict(h.buckets)}


def _put(fields: dict[str, Any], parts: list[str], value: Value) -> None:
    node = fields
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    if isinstance(value, Hist):
        node.setdefault(parts[-1], {}).update(_histogram(value))
    else:
        node[parts[-1]] = value
