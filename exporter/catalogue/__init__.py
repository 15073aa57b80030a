"""The metric catalogue: one row for each family the sidecar exports (exporter/catalogue/model.py
says what a row holds), in exposition order.

What reads it: the collectors build each family from its row (name, type, labels, HELP:
`exporter.collectors.families.gauge("helios_gpu_up")`), the offload collector renders the rows
read from the snapshot, exporter.cycle.derive watches their counters, `scripts/generate` writes the
README's metrics table and docs/interface.md's metric tables from it (exporter/catalogue/tables.py),
and the tests hold it equal to what the sidecar exports
(tests/exporter/catalogue/test_catalogue.py) and read it for the names dashboards may query.
The rows are in one module per collector group.
"""

from __future__ import annotations

from functools import cache

from exporter.catalogue import engine, engines, gpu, offload, restore, sidecar
from exporter.catalogue.model import Family, Promise, Rows
from exporter.labels import COLLECTORS

__all__ = ["FAMILIES", "Family", "Promise", "get", "match", "offload_rows", "snapshot_counters"]

# The order of exporter/collectors/registry.py: every collector, then the registry's own families.
_ORDER = (*COLLECTORS, "registry")
FAMILIES: Rows = tuple(sorted(
    (*offload.FAMILIES, *engines.FAMILIES, *engine.FAMILIES, *restore.FAMILIES,
     *sidecar.FAMILIES, *gpu.FAMILIES),
    key=lambda f: _ORDER.index(f.collector)))


@cache
def _by_name() -> dict[str, Family]:
    rows = {f.name: f for f in FAMILIES}
    if len(rows) != len(FAMILIES):
        raise AssertionError("a family is in the catalogue twice")
    return rows


def get(name: str) -> Family:
    """The row of a family the sidecar's own code exports; KeyError when there is none."""
    try:
        return _by_name()[name]
    except KeyError:
        raise KeyError(f"{name} is not in the metric catalogue (exporter/catalogue/)") from None


def match(name: str) -> Family | None:
    """The row an exported family belongs to: its own, or the open row whose prefix it has."""
    row = _by_name().get(name)
    if row is not None and not row.open:
        return row
    return next((f for f in FAMILIES if f.open and name.startswith(f.prefix)), None)


def offload_rows() -> Rows:
    """The offload tier's rows (`helios_offload_*`), in exposition order."""
    return tuple(f for f in FAMILIES if f.name.startswith("helios_offload_"))


def snapshot_counters() -> Rows:
    """The counters read from the snapshot: each one's samples must never go down within one
    generation (exporter.cycle.derive.counter_decreases)."""
    return tuple(f for f in FAMILIES if f.type == "counter" and f.field is not None)
