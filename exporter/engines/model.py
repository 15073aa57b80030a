"""One engine version's mapping: a row per catalogue signal (exporter/engines/signals.py) that
says how the engine supplies it: `native` (one of its families, as it is), `derived` (computed
from its families; `text` says how) or `absent` (`text` says why, and `gap` which upstream change
would fill it). A row reads only the engine families it names (`families`, in the colon form):
`Reader` refuses any other, and a test refuses a row naming a family the pinned version's own
code does not define.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from exporter.engines.exposition import Exposition, Series
from exporter.engines.signals import BY_NAME

How = Literal["native", "derived", "absent"]


class Inconsistent(ValueError):
    """The engine's values for a signal contradict each other (used above total, a page size
    of 0): the signal is left out of this poll and counted, the others stand."""


@dataclass(frozen=True, slots=True)
class Hist:
    """A histogram read from the engine: cumulative bucket counts by `le` as written, sum, count."""

    buckets: dict[str, float]
    sum: float
    count: float


Value = float | Hist


class Reader:
    """What a row's `read` sees of the exposition: only the families the row names."""

    def __init__(self, exp: Exposition, families: tuple[str, ...]) -> None:
        self._exp = exp
        self._families = families

    def _series(self, name: str, match: dict[str, str]) -> list[Series]:
        if name not in self._families:
            raise AssertionError(f"a row read {name}, which it does not name")
        return [(labels, v) for labels, v in self._exp.samples.get(name, ())
                if all(labels.get(k) == want for k, want in match.items())]

    def present(self, name: str) -> bool:
        if name not in self._families:
            raise AssertionError(f"a row read {name}, which it does not name")
        return self._exp.has(name)

    def one(self, name: str, **match: str) -> float | None:
        """The value every rank reports alike (the engine's own words: read one rank, do not sum
        them): the largest of the matching series; None when there is none."""
        values = [v for _, v in self._series(name, match)]
        return max(values) if values else None

    def total(self, name: str, **match: str) -> float | None:
        """The matching series summed (each rank's own share); None when there is none."""
        values = [v for _, v in self._series(name, match)]
        return math.fsum(values) if values else None

    def label(self, name: str, label: str) -> float | None:
        """A number an info gauge states as a label value (`block_size="64"`); None when no
        series has it; Inconsistent when it is not a number or two series disagree."""
        texts = {labels[label] for labels, _ in self._series(name, {}) if label in labels}
        if not texts:
            return None
        if len(texts) > 1:
            raise Inconsistent(f"{name}{{{label}}} is {' and '.join(sorted(texts))}")
        try:
            return float(texts.pop())
        except ValueError:
            raise Inconsistent(f"{name}{{{label}}} is not a number") from None

    def histogram(self, name: str, **match: str) -> Hist | None:
        """The histogram `name` (`_bucket`, `_sum`, `_count`), its series summed per `le`."""
        buckets: dict[str, float] = {}
        for labels, v in self._series(name + "_bucket", match):
            le = labels.get("le")
            if le is None:
                raise Inconsistent(f"{name}_bucket without le")
            if le != "+Inf":
                try:
                    bound = float(le)
                except ValueError:
                    bound = math.nan
                if not math.isfinite(bound):  # only `+Inf` is the last bucket
                    raise Inconsistent(f"{name}_bucket with le {le!r}")
                le = repr(bound)
            buckets[le] = buckets.get(le, 0.0) + v
        total, count = self.total(name + "_sum", **match), self.total(name + "_count", **match)
        if not buckets or total is None or count is None:
            return None
        return Hist(buckets, total, count)


Read = Callable[[Reader], Value | None]


@dataclass(frozen=True, slots=True)
class Row:
    signal: str  # exporter.engines.signals.SIGNALS
    how: How
    unit: str = ""  # of the value as mapped ("" for an absent row)
    text: str = ""  # native: the family; derived: how; absent: why
    families: tuple[str, ...] = ()  # engine sample names it reads (colon form)
    read: Read | None = None
    gap: str = ""  # the upstream change that would make it native

    def __post_init__(self) -> None:
        if self.signal not in BY_NAME:
            raise AssertionError(f"{self.signal} is not a signal (exporter/engines/signals.py)")
        # A signal outside the offload section (the generation) is derived elsewhere.
        reads = BY_NAME[self.signal].path is not None and self.how != "absent"
        if reads != (self.read is not None):
            raise AssertionError(f"{self.signal}: only a mapped offload signal reads")


def absent(signal: str, why: str, gap: str = "") -> Row:
    return Row(signal, "absent", text=why, gap=gap)


@dataclass(frozen=True, slots=True)
class Mapping:
    """One engine version's rows, one per signal, in the order of SIGNALS."""

    kind: str  # exporter.labels.ENGINE_KINDS
    version: str  # the engine version whose code defines every family named
    rows: tuple[Row, ...]
    # What the engine must be started with for the families to exist (docs/engines.md).
    flags: tuple[str, ...] = ()
    # Where the engine answers when it is alive (liveness).
    health_path: str = "/health"
    # Families every exposition of this engine holds once it serves (the kind check).
    marker: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if tuple(r.signal for r in self.rows) != tuple(BY_NAME):
            raise AssertionError(f"{self.kind} {self.version}: one row per signal, in order")

    @property
    def name(self) -> str:
        """`sglang-0.5.23`: a label value of helios_engine_kind_info{mapping}."""
        return f"{self.kind}-{self.version}"

    def families(self) -> frozenset[str]:
        """Every engine sample name a row reads."""
        return frozenset(f for r in self.rows for f in r.families)

    def wanted(self) -> frozenset[str]:
        """Every sample name the exposition parse must keep (histograms' parts included)."""
        return frozenset(self.families() | set(self.marker))


HISTOGRAM_PARTS: Final = ("_bucket", "_sum", "_count")


def histogram_parts(name: str) -> tuple[str, ...]:
    return tuple(name + part for part in HISTOGRAM_PARTS)
