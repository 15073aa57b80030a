"""One row of the metric catalogue: everything said about a family, in one place."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from exporter.snapshot import Offload

Type = Literal["gauge", "counter"]
# What a snapshot row reads: {label values after `generation`: value}; None when the family is
# absent from this snapshot (an empty mapping renders the family without samples).
Samples = Mapping[tuple[str, ...], float]
Reader = Callable[["Offload"], Samples | None]
# Base units (STYLE.md): a name that ends in one (before `_total`) declares it as its unit.
BASE_UNITS = ("seconds", "bytes", "ratio", "watts", "joules", "celsius", "hertz")


@dataclass(frozen=True)
class Promise:
    """Where docs/interface.md promises the family, and the interface version that added it."""

    section: str  # "4.1": the table of that section lists it
    since: int = 1


@dataclass(frozen=True)
class Family:
    """A metric family the sidecar exports.

    `name` is the name as scraped (a counter's with `_total`); an open row (`<name>` or `*` in it)
    stands for families named by someone else: the engine's allow-listed families, client_python's
    standard `process_*`. `help` is the HELP line (None: the library's own); `source` says in
    markdown where the value comes from or how it is derived, and for a promised family what the
    interface promises (docs/interface.md section 4 and the README are generated from it).
    `field` and `read`: a family read from the snapshot's `offload` section, as a field path whose
    `<label>` parts are label values, and the function that reads it; the offload collector renders
    such a row from `read`, and exporter.derive watches its counters for regressions.
    """

    name: str
    type: Type | None  # None: an open row, whatever the families' owner declares
    labels: tuple[str, ...]
    unit: str  # what one of the value counts: a base unit, or a noun ("" for a 0/1 state)
    source: str
    help: str | None
    collector: str  # exporter.labels.COLLECTORS, or "registry" (exporter/registry.py itself)
    promised: Promise | None = None
    labels_doc: str = ""  # the labels as the docs show them (closed sets, notes); default: names
    field: str | None = None
    read: Reader | None = None

    @property
    def open(self) -> bool:
        return "<" in self.name or "*" in self.name

    @property
    def prefix(self) -> str:
        """What every family an open row stands for starts with (the name itself otherwise)."""
        return self.name.split("<")[0].split("*")[0]

    @property
    def labels_text(self) -> str:
        return self.labels_doc or ", ".join(self.labels)

    def counter_key(self, values: tuple[str, ...]) -> str:
        """The field path of one sample of a snapshot row, without `offload.`, e.g.
        `evictions.row.attempts` (the keys of exporter.derive.offload_counters)."""
        assert self.field is not None, self.name
        path = self.field.removeprefix("offload.")
        for label, value in zip(self.labels[1:], values, strict=True):
            path = path.replace(f"<{label}>", value)
        return path


Rows = tuple[Family, ...]
