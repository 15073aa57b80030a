"""The background poll loop: one cycle per interval, whoever scrapes and however often.

Why poll in the background rather than at scrape time (the Prometheus guide's default): the restore
window must be observed even when nobody scrapes, NVML calls can hang, and the engine must see the
same load whether one or five Prometheus servers scrape us. Scrapes read the last cycle's results.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from exporter import derive, logs, passthrough
from exporter.labels import SOURCES
from exporter.restore.keeper import EventOutcome, RestoreKeeper
from exporter.restore.window import EventKind
from exporter.snapshot import Snapshot
from exporter.sources.base import Result, SourceHealth
from exporter.sources.blocking import BoundedRunner
from exporter.sources.engine import EngineSource, EngineTraffic

log = structlog.get_logger("helios_exporter.poller")


@dataclass(slots=True)
class EngineState:
    """What the collectors render for the engine; replaced or updated once per cycle."""

    snapshot: Snapshot | None = None  # last good snapshot
    snapshot_current: bool = False  # the latest poll produced it
    headroom: derive.Headroom | None = None
    counter_decreases: int = 0
    passthrough: passthrough.Parsed | None = None
    passthrough_generation: str | None = None
    labels_dropped: Counter[str] = field(default_factory=Counter)
    fields_dropped: Counter[str] = field(default_factory=Counter)  # identity.<name> per poll
    malformed_lines: int = 0
    generations_seen: int = 0


class Poller:
    def __init__(
        self,
        engine: EngineSource,
        traffic: EngineTraffic,
        keeper: RestoreKeeper,
        interval: float,
        max_series_per_family: int = 200,
        blocking: dict[str, BoundedRunner[Any]] | None = None,
        clock: Callable[[], float] = time.time,
        on_cycle: Callable[[], None] | None = None,
    ) -> None:
        self.engine_source = engine
        self.traffic = traffic
        self.keeper = keeper
        self.interval = interval
        self.max_series_per_family = max_series_per_family
        self.blocking = blocking or {}
        self.clock = clock
        self.on_cycle = on_cycle
        self.engine = EngineState()
        self.health: dict[str, SourceHealth] = {s: SourceHealth(enabled=False) for s in SOURCES}
        for name in ("engine_snapshot", "engine_metrics", *self.blocking):
            self.health[name].enabled = True
        self.latest: dict[str, Result[Any]] = {}
        self.cycles = 0
        self.last_cycle_duration: float | None = None
        self.ready = asyncio.Event()

    def load_state(self) -> None:
        self.keeper.load()
        self._changed()

    async def apply_event(self, event_id: str, kind: EventKind) -> EventOutcome:
        outcome = await self.keeper.apply_event(event_id, kind)
        self._changed()
        return outcome

    # -- the cycle ------------------------------------------------------------------------------
    async def cycle(self) -> None:
        t0 = time.perf_counter()
        now = self.clock()
        snap_res, metrics_res, *blocking_res = await asyncio.gather(
            self.engine_source.snapshot(),
            self.engine_source.metrics(self.max_series_per_family),
            *(runner.poll() for runner in self.blocking.values()),
        )
        self._record("engine_snapshot", snap_res)
        self._record("engine_metrics", metrics_res)
        for name, res in zip(self.blocking, blocking_res, strict=True):
            self._record(name, res)
        self._update_engine(snap_res, metrics_res)
        await self.keeper.observe(now, snap_res.value)
        self.cycles += 1
        self.last_cycle_duration = time.perf_counter() - t0
        self.ready.set()
        self._changed()

    def _record(self, name: str, res: Result[Any]) -> None:
        health = self.health[name]
        was_up = health.up
        health.record(res)
        self.latest[name] = res
        if res.ok and was_up is False:
            log.info("source_recovered", source=name)
        elif not res.ok and was_up is not False:
            # Logged on the transition only: a dead engine is one line, not one per poll.
            log.warning("source_down", source=name, reason=res.reason, error=res.message)

    def _update_engine(self, snap_res: Result[Snapshot], metrics_res: Result[Any]) -> None:
        eng = self.engine
        snap = snap_res.value
        if snap is not None:
            previous = eng.snapshot
            if previous is None or previous.generation != snap.generation:
                eng.generations_seen += 1
                logs.CONTEXT["generation"] = snap.generation
                log.info("generation_seen", generation=snap.generation,
                         derived=snap.generation_derived, started_at=snap.started_at)
            decreases = derive.counter_decreases(previous, snap)
            if decreases:
                eng.counter_decreases += len(decreases)
                log.warning("engine_counter_decreased", fields=decreases[:10],
                            generation=snap.generation)
            if snap.dropped_fields:
                eng.fields_dropped.update(snap.dropped_fields)
                if previous is None or previous.dropped_fields != snap.dropped_fields:
                    log.warning("snapshot_fields_dropped", fields=list(snap.dropped_fields),
                                reason="not usable as a label value")
            eng.headroom = derive.advance_headroom(eng.headroom, snap)
            eng.snapshot = snap
        eng.snapshot_current = snap is not None
        parsed = metrics_res.value
        eng.passthrough = parsed
        # Tagged only with a generation seen in this very cycle: right after a restart the old
        # one would mislabel the new engine's counters.
        eng.passthrough_generation = snap.generation if snap is not None else None
        if parsed is not None:
            eng.labels_dropped.update(parsed.labels_dropped)
            eng.malformed_lines += parsed.malformed_lines

    def _changed(self) -> None:
        if self.on_cycle is not None:
            self.on_cycle()

    async def run_forever(self) -> None:
        """Cycles aligned to the interval; a slow cycle delays the next one, never stacks."""
        while True:
            started = time.monotonic()
            try:
                await self.cycle()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug in one cycle must not stop observation of the window
                log.exception("poll_cycle_failed")
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    def close(self) -> None:
        for runner in self.blocking.values():
            runner.close()
