"""Host offload slabs: one byte budget carved into a row slab and a page slab.

Models Helios ``offload/slab.rs::Pool::sized_counts``: a fixed fraction of the budget (one quarter
by default) holds recurrent-state rows, the rest holds KV pages. Records are fixed-size, so each
slab is a free list of record ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GIB = 1 << 30
MIB = 1 << 20

DEFAULT_BUDGET_BYTES = 32 * GIB
DEFAULT_ROW_FRACTION = 0.25
DEFAULT_ROW_RECORD_BYTES = 16 * MIB
DEFAULT_PAGE_RECORD_BYTES = 1 * MIB

SlabKind = Literal["row", "page"]


@dataclass(frozen=True)
class SlabGeometry:
    """How a byte budget is split: ``row_fraction`` of it to rows, the rest to pages."""

    budget_bytes: int = DEFAULT_BUDGET_BYTES
    row_fraction: float = DEFAULT_ROW_FRACTION
    row_record_bytes: int = DEFAULT_ROW_RECORD_BYTES
    page_record_bytes: int = DEFAULT_PAGE_RECORD_BYTES

    def __post_init__(self) -> None:
        problems = []
        if self.budget_bytes <= 0:
            problems.append(f"budget_bytes must be positive, got {self.budget_bytes}")
        if not 0.0 < self.row_fraction < 1.0:
            problems.append(f"row_fraction must be in (0, 1), got {self.row_fraction}")
        if self.row_record_bytes <= 0:
            problems.append(f"row_record_bytes must be positive, got {self.row_record_bytes}")
        if self.page_record_bytes <= 0:
            problems.append(f"page_record_bytes must be positive, got {self.page_record_bytes}")
        if not problems:
            if self.row_capacity < 1:
                problems.append("the row slab holds no row: raise the budget or the row fraction")
            if self.page_capacity < 1:
                problems.append("the page slab holds no page: raise the budget or lower rows")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def row_slab_bytes(self) -> int:
        """Bytes reserved for the row slab (whole records only)."""
        return self.row_capacity * self.row_record_bytes

    @property
    def row_capacity(self) -> int:
        return int(self.budget_bytes * self.row_fraction) // self.row_record_bytes

    @property
    def page_capacity(self) -> int:
        return (self.budget_bytes - self.row_slab_bytes) // self.page_record_bytes


@dataclass(frozen=True)
class NamedGeometry:
    """A tier ``--geometry NAME`` serves: its slabs, and the stores per request it implies."""

    slabs: SlabGeometry
    stores_per_request: int | None  # None: the scenario's (runner.ENGINE_DEFAULTS)
    summary: str


# hybrid-tp2's row record: what tests/fixtures/layouts/hybrid-tp2.json derives (exporter/layout.py;
# tests/simulator/test_sim_geometry.py ties the two). 52 of them fill a quarter of 32 GiB, as the
# 52 resident host records of the engine team's control runs did (docs/simulator.md, Geometries).
HYBRID_TP2_ROW_RECORD_BYTES = 163_586_048

GEOMETRIES: dict[str, NamedGeometry] = {
    # Round record sizes derived from no model: fine for the mechanisms, not for capacities.
    "generic": NamedGeometry(
        SlabGeometry(), None,
        "32 GiB, a quarter to rows: 512 rows of 16 MiB, 24576 pages of 1 MiB (records derived "
        "from no model)"),
    "hybrid-tp2": NamedGeometry(
        SlabGeometry(row_record_bytes=HYBRID_TP2_ROW_RECORD_BYTES), 3,
        "32 GiB, a quarter to rows: 52 rows of 163586048 B, 24655 pages of 1 MiB, 3 stores per "
        "request (the control runs' tier; the records of tests/fixtures/layouts/hybrid-tp2.json)"),
}
DEFAULT_GEOMETRY = "generic"
# Former names still accepted by --geometry: name -> the geometry's name now.
FORMER_NAMES = {"seed-001": "hybrid-tp2"}


def geometry_name(text: str) -> str:
    """A --geometry value as the geometry's current name (a former name is accepted)."""
    return FORMER_NAMES.get(text, text)


class SlabExhausted(Exception):
    """No free record is left in a slab."""


class Slab:
    """Fixed-size records addressed by id; allocation pops the lowest free id."""

    def __init__(self, kind: SlabKind, capacity: int, record_bytes: int) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must not be negative, got {capacity}")
        self.kind: SlabKind = kind
        self.capacity = capacity
        self.record_bytes = record_bytes
        # A stack whose top is the lowest id keeps allocation order deterministic.
        self._free: list[int] = list(range(capacity - 1, -1, -1))
        self._used: set[int] = set()

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def used(self) -> int:
        return len(self._used)

    @property
    def used_bytes(self) -> int:
        return self.used * self.record_bytes

    def allocate(self) -> int:
        if not self._free:
            raise SlabExhausted(f"{self.kind} slab exhausted ({self.capacity} records)")
        record = self._free.pop()
        self._used.add(record)
        return record

    def release(self, record: int) -> None:
        if record not in self._used:
            raise ValueError(f"{self.kind} record {record} is not allocated")
        self._used.remove(record)
        self._free.append(record)

    def is_allocated(self, record: int) -> bool:
        return record in self._used

    def snapshot(self) -> dict[str, int]:
        return {"capacity": self.capacity, "free": self.free, "record_bytes": self.record_bytes}


class SlabPool:
    """The row slab and the page slab that share one budget."""

    def __init__(self, geometry: SlabGeometry | None = None) -> None:
        self.geometry = geometry or SlabGeometry()
        self.row = Slab("row", self.geometry.row_capacity, self.geometry.row_record_bytes)
        self.page = Slab("page", self.geometry.page_capacity, self.geometry.page_record_bytes)

    @property
    def used_bytes(self) -> int:
        return self.row.used_bytes + self.page.used_bytes

    def page_free_ratio(self) -> float:
        return self.page.free / self.page.capacity
