"""Offload-tier and engine series from the latest snapshot, every one tagged with `generation`.

Example (contract example snapshot):

    # TYPE helios_offload_slab_free gauge
    helios_offload_slab_free{generation="g-20261129T0412Z-7f3a",kind="row"} 0.0
    helios_offload_slab_free{generation="g-20261129T0412Z-7f3a",kind="page"} 20480.0
    # TYPE helios_offload_eviction_attempts_total counter
    helios_offload_eviction_attempts_total{generation="g-...",pressure="row"} 40.0
    # TYPE helios_engine_ranks gauge
    helios_engine_ranks{generation="g-20261129T0412Z-7f3a"} 2.0
    # TYPE helios_offload_geometry_consistent gauge
    helios_offload_geometry_consistent{generation="g-20261129T0412Z-7f3a"} 1.0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter import catalogue
from exporter.collectors.families import counter, gauge, render, render_histogram
from exporter.cycle import derive, geometry
from exporter.cycle.derive import EnginePicture
from exporter.cycle.geometry import Geometry
from exporter.labels import IDENTITY_FIELDS
from exporter.restore.window import RestoreState
from exporter.snapshot.model import Offload, Snapshot


class OffloadCollector:
    def __init__(
        self, engine: Callable[[], EnginePicture], restore: Callable[[], RestoreState],
        geometry: Callable[[], Geometry | None] | None = None,
    ) -> None:
        """`geometry`: the view's rules of the engine's snapshot (with --expect-layout's records);
        without it the arithmetic rules are checked here, on the snapshot alone."""
        self._engine = engine
        self._restore = restore
        self._geometry = geometry

    def collect(self) -> Iterator[Metric]:
        eng = self._engine()
        if eng.polled:  # absent until the first poll finished: unknown is not down
            up = gauge("helios_engine_up")
            up.add_metric([], 1.0 if eng.snapshot_current else 0.0)
            yield up
        snap = eng.snapshot
        window = self._restore().window
        if snap is None:
            # Restarted mid-window before the engine answered: the durable window still holds
            # the incumbent's last in-flight count, which the cutoff alert needs.
            if window is not None and window.incumbent and window.last_inflight is not None:
                inflight = gauge("helios_engine_inflight_requests")
                inflight.add_metric([window.incumbent.generation], window.last_inflight)
                yield inflight
            return
        window_open = window is not None
        if not eng.snapshot_current and not window_open:
            return  # stale values are not shown as current outside a restore window
        yield from _identity(snap)
        if eng.snapshot_current and snap.offload is not None:
            geo = (self._geometry() if self._geometry is not None
                   else geometry.check(snap.offload))
            yield from _offload(snap.generation, snap.offload, eng.headroom, geo)


def _identity(snap: Snapshot) -> Iterator[Metric]:
    gen = snap.generation
    ident = snap.identity
    info = gauge("helios_monitoring_generation_info")
    info.add_metric(
        [gen]
        + [
            (getattr(ident, k) or "") if ident else ""
            for k in IDENTITY_FIELDS
        ],
        1.0,
    )
    yield info
    if snap.started_at is not None:
        start = gauge("helios_monitoring_generation_start_timestamp_seconds")
        start.add_metric([gen], snap.started_at)
        yield start
    if snap.ranks is not None:
        ranks = gauge("helios_engine_ranks")
        ranks.add_metric([gen], len(snap.ranks))
        yield ranks
    if snap.admission is not None:
        adm = gauge("helios_engine_admission_open")
        adm.add_metric([gen], 1.0 if snap.admission.state == "open" else 0.0)
        yield adm
        if snap.admission.inflight_requests is not None:
            inflight = gauge("helios_engine_inflight_requests")
            inflight.add_metric([gen], snap.admission.inflight_requests)
            yield inflight


def _offload(gen: str, off: Offload, headroom: derive.Headroom | None,
             geo: Geometry | None) -> Iterator[Metric]:
    """Each offload row in catalogue order: read from the snapshot, or derived here."""
    derived = {
        "helios_offload_geometry_consistent": lambda: _consistent(gen, geo),
        "helios_offload_row_pressure_with_page_headroom_total": lambda: _headroom(gen, headroom),
    }
    for row in catalogue.offload_rows():
        if row.type == "histogram":
            histograms = row.histogram_reader()(off)
            if histograms is not None:
                yield render_histogram(row, histograms, gen)
            continue
        read = row.reader()
        if read is None:
            yield from derived[row.name]()
            continue
        samples = read(off)
        if samples is not None:
            yield render(row, samples, gen)


def _consistent(gen: str, geo: Geometry | None) -> Iterator[Metric]:
    if geo is not None:
        consistent = gauge("helios_offload_geometry_consistent")
        consistent.add_metric([gen], 1.0 if geo.consistent else 0.0)
        yield consistent


def _headroom(gen: str, headroom: derive.Headroom | None) -> Iterator[Metric]:
    if headroom is not None and headroom.generation == gen:
        c = counter("helios_offload_row_pressure_with_page_headroom_total")
        c.add_metric([gen], headroom.total)
        yield c
