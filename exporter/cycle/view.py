"""What one poll cycle leaves behind: the immutable `View` that every reader reads.

The poll loop publishes a new `View` at the end of every cycle, and again whenever the restore
keeper changes between cycles (a restore event, the state loaded at start). Collectors, /status and
/readyz read only the latest one, so one scrape never mixes two cycles and nothing a reader holds
ever changes under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from exporter.cycle.derive import EnginePicture
from exporter.cycle.geometry import Geometry
from exporter.cycle.gpu_selection import GpuSelection
from exporter.cycle.pins import PinCheck
from exporter.labels import SOURCES
from exporter.restore.keeper import RestoreView
from exporter.sources.base import Result, SourceHealth


def frozen(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """A read-only copy."""
    return MappingProxyType(dict(mapping))


def _empty() -> Mapping[Any, Any]:
    return MappingProxyType({})


def _no_sources() -> Mapping[str, SourceHealth]:
    return frozen({name: SourceHealth(enabled=False) for name in SOURCES})


@dataclass(frozen=True, slots=True)
class View:
    engine: EnginePicture = field(default_factory=EnginePicture)
    restore: RestoreView = field(default_factory=RestoreView)
    sources: Mapping[str, SourceHealth] = field(default_factory=_no_sources)  # every SOURCES name
    latest: Mapping[str, Result[Any]] = field(default_factory=_empty)  # blocking: host, nvml
    engine_requests: Mapping[tuple[str, str], int] = field(default_factory=_empty)  # path, outcome
    engine_response_bytes: Mapping[str, int] = field(default_factory=_empty)  # by path
    pins: tuple[PinCheck, ...] = ()  # every configured pin against this cycle's polls
    # The geometry rules of the last good snapshot (exporter/cycle/geometry.py), with --expect-layout's
    # records; None when it carries the inputs of none.
    geometry: Geometry | None = None
    gpus: GpuSelection = field(default_factory=GpuSelection)  # the GPUs /metrics shows
    cycles: int = 0
    last_cycle_duration: float | None = None  # seconds, all sources together
    open_phases: Mapping[str, float] = field(default_factory=_empty)  # experiment: name -> begin
    # Wall time this view's cycle began polling (after waiting for any cycle before it): when
    # what it shows of the engine was asked for. None before the first cycle.
    polled_at: float | None = None

    @property
    def ready(self) -> bool:
        """At least one poll cycle has completed."""
        return self.cycles > 0
