"""Shared pieces of the fuzz tests: bounded settings, rendering, and the label invariants."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, settings
from prometheus_client import CollectorRegistry, generate_latest

from exporter.collectors.offload import OffloadCollector
from exporter.collectors.passthrough import PassthroughCollector
from exporter.cycle import derive
from exporter.cycle.derive import EnginePicture
from exporter.defaults import MAX_SERIES_PER_FAMILY
from exporter.labels import EVICTION_OUTCOMES, MISS_REASONS, PRESSURES, SLAB_KINDS
from exporter.restore.window import RestoreState
from exporter.snapshot.model import Snapshot
from exporter.snapshot.parse import snapshot_from_obj
from exporter.sources import engine_metrics as passthrough

# Bounded: the folder runs in well under a minute on a busy two-core machine. No example
# database in the checkout.
FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])
PROMTOOL_SAMPLE = settings(FUZZ, max_examples=12)

GENERATION = re.compile(r"[A-Za-z0-9._:-]{1,64}")
IDENTITY = re.compile(r"[A-Za-z0-9._:@/+=-]{0,128}")  # "" when the engine left it out
CLOSED: dict[str, set[str]] = {
    "kind": set(SLAB_KINDS),
    "pressure": set(PRESSURES),
    "outcome": set(EVICTION_OUTCOMES),
    "reason": set(MISS_REASONS),
}


def render_snapshot(snap: Snapshot, headroom: derive.Headroom | None = None) -> bytes:
    registry = CollectorRegistry()
    state = EnginePicture(snapshot=snap, snapshot_current=True, polled=True, headroom=headroom)
    registry.register(OffloadCollector(lambda: state, RestoreState))
    return generate_latest(registry)


def first_poll(
    parsed: passthrough.Parsed, generation: str = "g-fuzz",
    max_series: int = MAX_SERIES_PER_FAMILY,
) -> EnginePicture:
    """The engine picture after the first cycle of `generation`, whose /metrics parsed so."""
    snap = snapshot_from_obj({"schema_version": 1, "generation": generation})
    return derive.advance_engine(EnginePicture(), snap, parsed, max_series)


def exported_families(picture: EnginePicture) -> list[passthrough.Family]:
    """The pass-through families the picture exports (gauges parsed, counters folded)."""
    assert picture.passthrough is not None
    native = picture.native.families if picture.native is not None else ()
    return [*picture.passthrough.families, *native]


def render_passthrough(
    parsed: passthrough.Parsed, generation: str = "g-fuzz", max_series: int = MAX_SERIES_PER_FAMILY
) -> bytes:
    registry = CollectorRegistry()
    state = first_poll(parsed, generation, max_series)
    registry.register(PassthroughCollector(lambda: state))
    return generate_latest(registry)


def assert_offload_labels_bounded(fams: dict[str, Any]) -> None:
    for fam in fams.values():
        for s in fam.samples:
            for name, value in s.labels.items():
                if name == "generation":
                    assert GENERATION.fullmatch(value), repr(value)
                elif name in ("image_digest", "container_id", "package", "checkpoint"):
                    assert IDENTITY.fullmatch(value), repr(value)
                else:
                    assert value in CLOSED[name], (s.name, name, value)
