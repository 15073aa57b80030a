"""The background poll loop: one cycle per interval, whoever scrapes and however often.

Why poll in the background rather than at scrape time (the Prometheus guide's default): the restore
window must be observed even when nobody scrapes, NVML calls can hang, and the engine must see the
same load whether one or five Prometheus servers scrape us.

One cycle: poll every source at once, derive the engine picture (`derive.advance_engine`), hand
the snapshot to the restore keeper, and publish one immutable `View`. Scrapes read the latest
view; `on_publish` tells the exposition cache that it changed. Cycles never overlap: an experiment
phase's edge runs one of its own (`cycle(blocking=False)`, the engine only) between two timed ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import structlog

from exporter import logs
from exporter.cycle import derive, geometry, gpu_selection, pins
from exporter.cycle.pins import Pins
from exporter.cycle.view import View, frozen
from exporter.defaults import MAX_SERIES_PER_FAMILY
from exporter.layout import Records
from exporter.restore.keeper import RestoreKeeper
from exporter.snapshot.model import Snapshot
from exporter.sources.base import Result, SourceHealth
from exporter.sources.blocking import BoundedRunner
from exporter.sources.engine import EngineSource

log = structlog.get_logger("helios_exporter.loop")


class PollLoop:
    def __init__(
        self,
        engine_source: EngineSource,
        keeper: RestoreKeeper,
        interval: float,
        *,
        max_series_per_family: int = MAX_SERIES_PER_FAMILY,
        blocking: Mapping[str, BoundedRunner[Any]] | None = None,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.perf_counter,
        on_publish: Callable[[View], None] | None = None,
        pins: Pins | None = None,
        nvml_all_gpus: bool = False,
        layout: Records | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine_source = engine_source
        self._keeper = keeper
        self._interval = interval
        self._max_series = max_series_per_family
        self._blocking = dict(blocking or {})
        self._clock = clock
        self._timer = timer
        self._on_publish = on_publish
        self._pins = pins or Pins()
        self._nvml_all_gpus = nvml_all_gpus
        self._layout = layout  # --expect-layout's records, derived once at start
        # The loop's only state between cycles is the view it last published.
        sources = dict(View().sources)
        for name in ("engine_snapshot", "engine_metrics", *self._blocking):
            sources[name] = SourceHealth(enabled=True)
        self._view = View(restore=keeper.view(), sources=frozen(sources))
        # A restore event (or the state loaded at start) changes the keeper between cycles.
        keeper.on_change(lambda: self._publish(replace(self._view, restore=keeper.view())))
        # Two cycles at once would derive from the same previous view and one would be lost.
        self._cycle_lock = asyncio.Lock()
        # Freshness (/healthz, /status): when the last cycle completed, on a monotonic clock;
        # before the first, when the loop started.
        self._monotonic = monotonic
        self._alive_since = monotonic()
        self._last_completed: float | None = None

    @property
    def view(self) -> View:
        """The latest published view."""
        return self._view

    def since_last_cycle(self) -> float:
        """Seconds since a poll cycle last completed (since the loop started, before the first)."""
        done = self._last_completed if self._last_completed is not None else self._alive_since
        return max(0.0, self._monotonic() - done)

    @property
    def keeper(self) -> RestoreKeeper:
        """The restore keeper: events go to it directly; its changes are published here."""
        return self._keeper

    @property
    def blocking_sources(self) -> tuple[str, ...]:
        return tuple(self._blocking)

    # -- the restore keeper, published -------------------------------------------------------
    def load_state(self) -> None:
        """Read the saved restore state (at start); the keeper's change is published."""
        self._keeper.load()

    def publish_open_phases(self, phases: Mapping[str, float]) -> None:
        """The experiment phases open now (name -> begin time), published for the collectors."""
        self._publish(replace(self._view, open_phases=frozen(phases)))

    # -- the cycle -----------------------------------------------------------------------------
    async def cycle(self, *, blocking: bool = True) -> View:
        """One poll cycle; the view it published. `blocking=False` polls the engine only (NVML
        and the host keep their last results): a phase edge must not wait on a slow GPU."""
        async with self._cycle_lock:
            return await self._cycle(blocking)

    async def _cycle(self, blocking: bool) -> View:
        t0 = self._timer()
        now = self._clock()
        runners = self._blocking if blocking else {}
        snap_res, metrics_res, *blocking_res = await asyncio.gather(
            self._engine_source.snapshot(),
            self._engine_source.metrics(self._max_series),
            *(runner.poll() for runner in runners.values()),
        )
        before = self._view
        sources = dict(before.sources)
        latest = dict(before.latest)
        for name, res in (("engine_snapshot", snap_res), ("engine_metrics", metrics_res),
                          *zip(runners, blocking_res, strict=True)):
            sources[name] = _recorded(name, sources[name], res)
            if name in self._blocking:
                latest[name] = res
        engine = derive.advance_engine(before.engine, snap_res.value, metrics_res.value,
                                       self._max_series)
        _log_engine(before.engine, engine, snap_res.value)
        await self._keeper.observe(now, snap_res.value, snap_res.reason)
        nvml = latest.get("nvml")
        report = nvml.value if nvml is not None else None
        pin_checks = pins.check(self._pins, snap_res.value, pins.power_limits(report))
        gpus = before.gpus
        if nvml is not None:
            ranks = engine.snapshot.ranks if engine.snapshot is not None else None
            gpus = gpu_selection.advance(gpus, ranks, report, all_gpus=self._nvml_all_gpus)
        traffic = self._engine_source.traffic
        self._publish(View(
            engine=engine,
            restore=self._keeper.view(),
            sources=frozen(sources),
            latest=frozen(latest),
            engine_requests=frozen(traffic.requests),
            engine_response_bytes=frozen(traffic.response_bytes),
            pins=pin_checks,
            geometry=geometry.check(engine.snapshot.offload if engine.snapshot else None,
                                    self._layout),
            gpus=gpus,
            cycles=before.cycles + 1,
            last_cycle_duration=self._timer() - t0,
            open_phases=self._view.open_phases,  # read after the awaits: a phase may have begun
            polled_at=now,
        ))
        self._last_completed = self._monotonic()
        return self._view

    def _publish(self, view: View) -> None:
        self._view = view
        if self._on_publish is not None:
            self._on_publish(view)

    async def run_forever(self) -> None:
        """Cycles aligned to the interval; a slow cycle delays the next one, never stacks."""
        self._alive_since = self._monotonic()
        while True:
            started = time.monotonic()
            try:
                await self.cycle()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug in one cycle must not stop observation of the window
                log.exception("poll_cycle_failed")
            await asyncio.sleep(max(0.0, self._interval - (time.monotonic() - started)))

    def close(self) -> None:
        for runner in self._blocking.values():
            runner.close()


def _recorded(name: str, health: SourceHealth, res: Result[Any]) -> SourceHealth:
    if res.ok and health.up is False:
        log.info("source_recovered", source=name)
    elif not res.ok and health.up is not False:
        # Logged on the transition only: a dead engine is one line, not one per poll.
        log.warning("source_down", source=name, reason=res.reason, error=res.message)
    return health.recorded(res)


def _log_engine(before: derive.EnginePicture, after: derive.EnginePicture,
                snap: Snapshot | None) -> None:
    """What changed about the engine in this cycle, logged once per change."""
    if snap is None:
        return
    previous = before.snapshot
    if after.generations_seen != before.generations_seen:
        logs.CONTEXT["generation"] = snap.generation
        log.info("generation_seen", generation=snap.generation,
                 derived=snap.generation_derived, started_at=snap.started_at)
    if after.decreased_fields:
        log.warning("engine_counter_decreased", fields=list(after.decreased_fields[:10]),
                    generation=snap.generation)
    if snap.dropped_fields and (previous is None or previous.dropped_fields != snap.dropped_fields):
        log.warning("snapshot_fields_dropped", fields=list(snap.dropped_fields),
                    reason="not usable as a label value")
