"""The snapshot's reading model: the immutable, typed `Snapshot` a poll cycle reads, and the
`SnapshotError` that says why a body is not one (exporter/snapshot/parse.py builds both)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from exporter.labels import ErrorReason

AdmissionState = Literal["open", "draining", "closed"]


class SnapshotError(ValueError):
    """A snapshot that cannot be used; `reason` is a closed-set value, `path` a field path."""

    def __init__(self, reason: ErrorReason, message: str, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.reason = reason
        self.path = path


@dataclass(frozen=True, slots=True)
class Identity:
    image_digest: str | None = None
    container_id: str | None = None
    package: str | None = None
    checkpoint: str | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    state: AdmissionState
    inflight_requests: int | None


@dataclass(frozen=True, slots=True)
class Rank:
    rank: int
    gpu_uuid: str


@dataclass(frozen=True, slots=True)
class Slab:
    capacity: int
    free: int
    record_bytes: int


@dataclass(frozen=True, slots=True)
class Lookups:
    total: int
    hits: int | None
    misses: dict[str, int] | None  # raw engine keys; mapped onto the closed set in derive


@dataclass(frozen=True, slots=True)
class Offload:
    """The offload section. `fields` is the section as the schema validated it: the metric
    catalogue reads every field by its path there (exporter/catalogue/model.py), so a new field
    needs no attribute here. The typed attributes are only those the sidecar's own checks read
    (geometry, derive, the phase captures); each is read somewhere."""

    budget_bytes: int | None
    slabs: dict[str, Slab]
    resident_bytes: int | None
    lookups: Lookups | None
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Snapshot:
    generation: str
    generation_derived: bool  # True when the engine sent none and we derived it
    started_at: float | None
    identity: Identity | None
    admission: Admission | None
    ranks: tuple[Rank, ...] | None
    offload: Offload | None
    # Identity fields whose value cannot be a label value (pattern in the schema): left out,
    # so the checks that need them are unknown, rather than the whole snapshot being rejected;
    # and v3 sections that broke the schema or a histogram rule, left out likewise.
    dropped_fields: tuple[str, ...] = ()
    schema_version: int = 1
    # (v3) identity.engine: what software answers, e.g. "helios-simulator" (docs/snapshot.md);
    # never a label; the lab's evidence is labelled SIMULATED from it. None when absent or not a
    # label-shaped string.
    engine: str | None = None
