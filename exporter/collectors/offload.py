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

from exporter import derive, geometry
from exporter.collectors.families import counter, gauge
from exporter.derive import EnginePicture
from exporter.geometry import Geometry
from exporter.labels import EVICTION_OUTCOMES
from exporter.restore.window import RestoreState
from exporter.snapshot import Offload, Snapshot

G = "generation"
_INFLIGHT_HELP = ("Snapshot admission.inflight_requests; during a restore window, the last value "
                  "seen before the engine went away.")


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
            up = gauge("helios_engine_up",
                       "1 when the latest poll of the engine snapshot succeeded.")
            up.add_metric([], 1.0 if eng.snapshot_current else 0.0)
            yield up
        snap = eng.snapshot
        window = self._restore().window
        if snap is None:
            # Restarted mid-window before the engine answered: the durable window still holds
            # the incumbent's last in-flight count, which the cutoff alert needs.
            if window is not None and window.incumbent and window.last_inflight is not None:
                inflight = gauge("helios_engine_inflight_requests", _INFLIGHT_HELP, [G])
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
    info = gauge(
        "helios_monitoring_generation_info",
        "Engine incarnation being monitored (snapshot generation and identity); always 1.",
        [G, "image_digest", "container_id", "package", "checkpoint"],
    )
    info.add_metric(
        [gen]
        + [
            (getattr(ident, k) or "") if ident else ""
            for k in ("image_digest", "container_id", "package", "checkpoint")
        ],
        1.0,
    )
    yield info
    if snap.started_at is not None:
        start = gauge("helios_monitoring_generation_start_timestamp_seconds",
                      "Snapshot started_at: when this engine incarnation started (unix seconds).",
                      [G])
        start.add_metric([gen], snap.started_at)
        yield start
    if snap.ranks is not None:
        ranks = gauge("helios_engine_ranks",
                      "Number of entries in the snapshot's ranks (2 for TP2).", [G])
        ranks.add_metric([gen], len(snap.ranks))
        yield ranks
    if snap.admission is not None:
        adm = gauge("helios_engine_admission_open",
                    "1 when snapshot admission.state is open, else 0 (draining or closed).", [G])
        adm.add_metric([gen], 1.0 if snap.admission.state == "open" else 0.0)
        yield adm
        if snap.admission.inflight_requests is not None:
            inflight = gauge("helios_engine_inflight_requests", _INFLIGHT_HELP, [G])
            inflight.add_metric([gen], snap.admission.inflight_requests)
            yield inflight


def _offload(gen: str, off: Offload, headroom: derive.Headroom | None,
             geo: Geometry | None) -> Iterator[Metric]:
    if off.slabs:
        cap = gauge("helios_offload_slab_capacity",
                    "Snapshot offload.slabs.<kind>.capacity: records the slab holds.", [G, "kind"])
        free = gauge("helios_offload_slab_free",
                     "Snapshot offload.slabs.<kind>.free: records free now.", [G, "kind"])
        rec = gauge("helios_offload_slab_record_bytes",
                    "Snapshot offload.slabs.<kind>.record_bytes: bytes per record.", [G, "kind"])
        for kind, slab in off.slabs.items():
            cap.add_metric([gen, kind], slab.capacity)
            free.add_metric([gen, kind], slab.free)
            rec.add_metric([gen, kind], slab.record_bytes)
        yield from (cap, free, rec)
    if off.budget_bytes is not None:
        budget = gauge("helios_offload_budget_bytes",
                       "Snapshot offload.budget_bytes: host bytes carved into rows and pages.", [G])
        budget.add_metric([gen], off.budget_bytes)
        yield budget
    if off.resident_records is not None:
        m = gauge("helios_offload_resident_records",
                  "Snapshot offload.resident.records: records resident in the host tier.", [G])
        m.add_metric([gen], off.resident_records)
        yield m
    if off.resident_bytes is not None:
        m = gauge("helios_offload_resident_bytes",
                  "Snapshot offload.resident.bytes: bytes resident in the host tier.", [G])
        m.add_metric([gen], off.resident_bytes)
        yield m
    if off.evictions:
        attempts = counter("helios_offload_eviction_attempts_total",
                           "Snapshot offload.evictions.<pressure>.attempts: eviction requests "
                           "made under row or page pressure.", [G, "pressure"])
        outcomes = counter("helios_offload_eviction_outcomes_total",
                           "Snapshot offload.evictions.<pressure>.<outcome>: how attempts ended.",
                           [G, "pressure", "outcome"])
        for pressure, ev in off.evictions.items():
            attempts.add_metric([gen, pressure], ev.attempts)
            for outcome in EVICTION_OUTCOMES:
                if outcome in ev.outcomes:
                    outcomes.add_metric([gen, pressure, outcome], ev.outcomes[outcome])
        yield from (attempts, outcomes)
    if off.retired_leaves:
        retired = counter("helios_offload_retired_leaves_total",
                          "Snapshot offload.retired_leaves.<kind>: rows/pages freed by retiring "
                          "leaves.", [G, "kind"])
        for kind, value in off.retired_leaves.items():
            retired.add_metric([gen, kind], value)
        yield retired
    if off.ancestor_row_compactions is not None:
        c = counter("helios_offload_ancestor_compactions_total",
                    "Snapshot offload.ancestor_row_compactions: single-child ancestor rows "
                    "compacted.", [G])
        c.add_metric([gen], off.ancestor_row_compactions)
        yield c
    if off.lookups is not None:
        yield from _lookups(gen, off)
    if geo is not None:
        consistent = gauge(
            "helios_offload_geometry_consistent",
            "1 when the snapshot's offload arithmetic holds: slabs' capacity x record_bytes within "
            "budget_bytes, resident.bytes within budget_bytes, lookups hits + misses within "
            "lookups.total, and with --expect-layout each slab's record_bytes as the layout "
            "derives it (the rules checked are those whose fields the snapshot has; /status "
            "names a failed one).",
            [G],
        )
        consistent.add_metric([gen], 1.0 if geo.consistent else 0.0)
        yield consistent
    if off.host is not None:
        for field, name, doc in (
            ("stores", "helios_offload_host_stores_total", "Snapshot offload.host.stores."),
            ("tokens_restored", "helios_offload_host_tokens_restored_total",
             "Snapshot offload.host.tokens_restored: tokens restored from the host tier."),
            ("prompt_tokens_reused", "helios_offload_prompt_tokens_reused_total",
             "Snapshot offload.host.prompt_tokens_reused."),
        ):
            value = getattr(off.host, field)
            if value is not None:
                c = counter(name, doc, [G])
                c.add_metric([gen], value)
                yield c
    if headroom is not None and headroom.generation == gen:
        c = counter(
            "helios_offload_row_pressure_with_page_headroom_total",
            "Row-pressure eviction attempts (offload.evictions.row.attempts deltas between polls) "
            "seen while the page slab had at least 25% free at both polls.",
            [G],
        )
        c.add_metric([gen], headroom.total)
        yield c


def _lookups(gen: str, off: Offload) -> Iterator[Metric]:
    lookups = off.lookups
    assert lookups is not None
    total = counter("helios_offload_lookups_total", "Snapshot offload.lookups.total.", [G])
    total.add_metric([gen], lookups.total)
    yield total
    if lookups.hits is not None:
        hits = counter("helios_offload_lookup_hits_total", "Snapshot offload.lookups.hits.", [G])
        hits.add_metric([gen], lookups.hits)
        yield hits
    if lookups.misses is not None:
        misses = counter(
            "helios_offload_lookup_misses_total",
            "Snapshot offload.lookups.misses, keys mapped onto a closed reason set (text before "
            "the first ':'; unknown keys become other).",
            [G, "reason"],
        )
        for reason, value in derive.miss_counts(lookups.misses).items():
            misses.add_metric([gen, reason], value)
        yield misses
