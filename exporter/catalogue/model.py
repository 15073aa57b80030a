"""One row of the metric catalogue: everything said about a family, in one place."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from exporter.snapshot.schemas import HISTOGRAM_KEYS

if TYPE_CHECKING:
    from exporter.snapshot.model import Offload

Type = Literal["gauge", "counter", "histogram"]
# What a snapshot row reads: {label values after `generation`: value}; None when the family is
# absent from this snapshot (an empty mapping renders the family without samples).
Samples = Mapping[tuple[str, ...], float]
Reader = Callable[["Offload"], Samples | None]


@dataclass(frozen=True)
class Histogram:
    """One histogram sample: cumulative buckets (`le` as Prometheus writes it, `+Inf` last, whose
    count is the histogram's count) and the sum."""

    buckets: tuple[tuple[str, float], ...]
    sum: float


HistogramSamples = Mapping[tuple[str, ...], Histogram]
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
    interface promises (docs/interface.md section 4 and the README are generated from it); the
    field's path when it says nothing more.
    `field`: a family read from the snapshot's `offload` section, as a field path whose `<label>`
    parts are label values, each from its closed set in `values` (keys outside it are skipped);
    the offload collector renders such a row and exporter.cycle.derive watches its counters for
    regressions. `read` replaces the path reader where a field needs more (misses mapped onto
    their reasons).
    A histogram row's `field` is the path of the histogram objects (their keys as the schema
    names them, exporter.snapshot.schemas.HISTOGRAM_KEYS); `max_buckets` bounds the buckets exported
    per series, `+Inf` included (`histogram_reader` says which of the engine's bounds are kept).
    """

    name: str
    type: Type | None  # None: an open row, whatever the families' owner declares
    labels: tuple[str, ...]
    unit: str  # what one of the value counts: a base unit, or a noun ("" for a 0/1 state); an
    # open row's says whose types and units its families have
    _: dataclasses.KW_ONLY
    help: str | None
    collector: str  # exporter.labels.COLLECTORS, or "registry" (exporter/collectors/registry.py itself)
    source: str = ""  # default: the field, as code
    promised: Promise | None = None
    labels_doc: str = ""  # the labels as the docs show them; default: names and closed sets
    field: str | None = None
    values: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    read: Reader | None = None
    max_buckets: int = 0

    @property
    def open(self) -> bool:
        return "<" in self.name or "*" in self.name

    @property
    def prefix(self) -> str:
        """What every family an open row stands for starts with (the name itself otherwise)."""
        return self.name.split("<")[0].split("*")[0]

    @property
    def labels_text(self) -> str:
        return self.labels_doc or ", ".join(
            f"{label}={'|'.join(self.values[label])}" if label in self.values else label
            for label in self.labels)

    @property
    def source_text(self) -> str:
        return self.source or f"`{self.field}`"

    def reader(self) -> Reader | None:
        """How the row reads the snapshot: `read`, or its field's path; None if it does not."""
        if self.read is not None or self.field is None or self.type == "histogram":
            return self.read
        return path_reader(self.field, self.values)

    def histogram_reader(self) -> Callable[[Offload], HistogramSamples | None]:
        assert self.type == "histogram" and self.field is not None and self.max_buckets >= 2, \
            self.name
        return histogram_reader(self.field, self.values, self.max_buckets)

    def counter_key(self, values: tuple[str, ...]) -> str:
        """The field path of one sample of a snapshot row, without `offload.`, e.g.
        `evictions.row.attempts` (the keys of exporter.cycle.derive.offload_counters)."""
        assert self.field is not None, self.name
        path = self.field.removeprefix("offload.")
        for label, value in zip(self.labels[1:], values, strict=True):
            path = path.replace(f"<{label}>", value)
        return path


Rows = tuple[Family, ...]


def _walk(field: str, values: Mapping[str, tuple[str, ...]], off: Offload) -> dict[
        tuple[str, ...], Any]:
    """The nodes at `field` (`offload.evictions.<pressure>.attempts`) in the validated snapshot,
    keyed by the keys where the path has `<label>` (in the snapshot's order, those of the label's
    closed set only)."""
    parts = field.removeprefix("offload.").split(".")
    out: dict[tuple[str, ...], Any] = {}

    def walk(node: Any, i: int, key: tuple[str, ...]) -> None:
        if i == len(parts):
            out[key] = node
            return
        if not isinstance(node, Mapping):
            return
        part = parts[i]
        if part.startswith("<"):
            closed = values[part[1:-1]]
            for name, child in node.items():
                if name in closed:
                    walk(child, i + 1, (*key, name))
        elif part in node:
            walk(node[part], i + 1, key)

    walk(off.fields, 0, ())
    return out


def path_reader(field: str, values: Mapping[str, tuple[str, ...]]) -> Reader:
    """A reader of `field` in the validated snapshot: one sample per number found (labelled as
    `_walk` says); None when there is none."""

    def read(off: Offload) -> Samples | None:
        out = {key: node for key, node in _walk(field, values, off).items()
               if isinstance(node, int | float) and not isinstance(node, bool)}
        return out or None

    return read


def le_text(bound: float) -> str:
    """A bucket bound as the `le` label writes it (`0.005`, `10.0`, `+Inf`)."""
    return "+Inf" if bound == math.inf else repr(bound)


def kept_bounds(finite: list[float], keep: int) -> list[float]:
    """At most `keep` of the sorted finite bounds, evenly spaced, the largest always among them:
    a cumulative histogram is as exact at the bounds it keeps (the others only merge)."""
    if len(finite) <= keep:
        return finite
    return [finite[round((i + 1) * len(finite) / keep) - 1] for i in range(keep)]


@cache
def histogram_keys(field: str) -> tuple[str, str, str]:
    """The count, sum and buckets keys of the histograms at `field` (`<label>` parts match any
    key), as the snapshot's schema names them; KeyError when the schema has no histogram there."""
    parts = field.split(".")
    for path, keys in HISTOGRAM_KEYS.items():
        found = path.split(".")
        if len(found) == len(parts) and all(p == f or p.startswith("<")
                                            for p, f in zip(parts, found, strict=True)):
            return keys
    raise KeyError(f"{field}: no histogram of the snapshot schema is there")


def histogram_reader(field: str, values: Mapping[str, tuple[str, ...]], max_buckets: int,
                     ) -> Callable[[Offload], HistogramSamples | None]:
    """A reader of the histogram objects at `field`, each with at most `max_buckets` buckets."""
    _, sum_key, buckets_key = histogram_keys(field)

    def one(node: Mapping[str, Any]) -> Histogram:
        counts = {float(le): n for le, n in node[buckets_key].items()}
        finite = sorted(b for b in counts if b != math.inf)
        kept = [*kept_bounds(finite, max_buckets - 1), math.inf]
        return Histogram(tuple((le_text(b), counts[b]) for b in kept), node[sum_key])

    def read(off: Offload) -> HistogramSamples | None:
        out = {key: one(node) for key, node in _walk(field, values, off).items()
               if isinstance(node, Mapping) and buckets_key in node}  # bytes alone: no histogram
        return out or None

    return read
