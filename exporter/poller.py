"""The background poll loop: one cycle per interval, whoever scrapes and however often.

Why poll in the background rather than at scrape time (the Prometheus guide's default): the restore
window must be observed even when nobody scrapes, NVML calls can hang, and the engine must see the
same load whether one or five Prometheus servers scrape us. Scrapes read the last cycle's results.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from exporter import derive, logs, passthrough
from exporter.labels import SOURCES
from exporter.restore.store import StateFileError, StateStore
from exporter.restore.window import Bounds, Event, Input, Poll, Preflight, RestoreState, step
from exporter.snapshot import Snapshot
from exporter.sources.base import Result, SourceHealth
from exporter.sources.blocking import BoundedRunner
from exporter.sources.engine import EngineSource, EngineTraffic

log = structlog.get_logger("helios_exporter.poller")

PreflightProbe = Callable[[], Awaitable[tuple[bool, str]]]


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


@dataclass(slots=True)
class RestoreStatus:
    state: RestoreState = field(default_factory=RestoreState)
    write_errors: int = 0
    corrupt_files: int = 0
    read_errors: int = 0
    last_write_error: str = ""
    events: Counter[tuple[str, str]] = field(default_factory=Counter)  # (event, result)


class Poller:
    def __init__(
        self,
        engine: EngineSource,
        traffic: EngineTraffic,
        bounds: Bounds,
        store: StateStore,
        interval: float,
        max_series_per_family: int = 200,
        blocking: dict[str, BoundedRunner[Any]] | None = None,
        preflight: dict[str, PreflightProbe] | None = None,
        clock: Callable[[], float] = time.time,
        on_cycle: Callable[[], None] | None = None,
    ) -> None:
        self.engine_source = engine
        self.traffic = traffic
        self.bounds = bounds
        self.store = store
        self.interval = interval
        self.max_series_per_family = max_series_per_family
        self.blocking = blocking or {}
        self.preflight = preflight or {}
        self.clock = clock
        self.on_cycle = on_cycle
        self.engine = EngineState()
        self.restore = RestoreStatus()
        self.health: dict[str, SourceHealth] = {s: SourceHealth(enabled=False) for s in SOURCES}
        for name in ("engine_snapshot", "engine_metrics", *self.blocking):
            self.health[name].enabled = True
        self.latest: dict[str, Result[Any]] = {}
        self.cycles = 0
        self.last_cycle_duration: float | None = None
        self.ready = asyncio.Event()
        self._lock = asyncio.Lock()  # restore transitions: poll cycle vs events API
        self._dirty = False  # the state in memory is not on disk yet (a write failed)
        self._store_blocked = False  # the state file exists but could not be read

    # -- restore state --------------------------------------------------------------------------
    def load_state(self) -> None:
        try:
            saved = self.store.load()
        except StateFileError as exc:
            if exc.unreadable:
                # It may hold an open window: never overwrite it; read it again every cycle.
                if not self._store_blocked:
                    self.restore.read_errors += 1
                    log.error("restore_state_unreadable", error=str(exc),
                              path=str(self.store.path))
                self._store_blocked = True
            else:
                self.restore.corrupt_files += 1
                log.error("restore_state_unusable", error=str(exc),
                          moved_to=str(exc.moved_to) if exc.moved_to else None)
            return
        if self._store_blocked:
            self._store_blocked = False
            log.info("restore_state_readable_again", path=str(self.store.path))
            if saved is not None and saved.window is not None and self.restore.state.window is None:
                self.restore.state = saved  # the durable window wins over a fresh start
            self._persist(self.restore.state)
            return
        if saved is not None:
            self.restore.state = saved
            logs.CONTEXT["phase"] = saved.phase
            log.info("restore_state_loaded", phase=saved.phase,
                     window_start=saved.window.start if saved.window else None)

    def _apply(self, inp: Input) -> RestoreState:
        before = self.restore.state
        after = step(before, inp, self.bounds)
        if after != before:
            self.restore.state = after
            logs.CONTEXT["phase"] = after.phase
            self._persist(after)
            if after.phase != before.phase or (after.window is None) != (before.window is None):
                log.info("restore_transition", phase=after.phase, previous=before.phase,
                         window_start=after.window.start if after.window else None,
                         cause=after.window.cause if after.window else None,
                         checks=after.checks if after.window is None else None)
        return after

    def _persist(self, state: RestoreState) -> bool:
        """Write the state; on failure it stays dirty and every cycle retries."""
        if self._store_blocked:
            if not self._dirty:
                self.restore.write_errors += 1
                self.restore.last_write_error = "state file unreadable: not overwritten"
                log.error("restore_state_write_held", path=str(self.store.path),
                          error=self.restore.last_write_error)
            self._dirty = True
            return False
        try:
            self.store.save(state)
        except OSError as exc:
            self._dirty = True
            self.restore.write_errors += 1
            self.restore.last_write_error = f"{type(exc).__name__}: {exc.strerror or exc}"
            log.error("restore_state_write_failed", error=self.restore.last_write_error,
                      path=str(self.store.path))
            return False
        if self._dirty:
            log.info("restore_state_written_again", path=str(self.store.path))
        self._dirty = False
        return True

    async def apply_event(self, event_id: str, kind: str) -> tuple[bool, RestoreState, bool]:
        """Apply one events-API event; returns (duplicate, state after, state on disk)."""
        async with self._lock:
            if event_id in self.restore.state.event_ids:
                self.restore.events[(kind, "duplicate")] += 1
                return True, self.restore.state, not self._dirty
            state = self._apply(Event(self.clock(), event_id, kind))  # type: ignore[arg-type]
            self.restore.events[(kind, "accepted")] += 1
            self._changed()
            return False, state, not self._dirty

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
        async with self._lock:
            if self._store_blocked:
                self.load_state()
            before = self.restore.state
            state = self._apply(Poll(now, snap_res.value))
            if self._dirty and self.restore.state is before:  # nothing new, but not on disk yet
                self._persist(state)
        if state.phase == "verifying" and self.preflight:
            await self._run_preflight(state)
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

    async def _run_preflight(self, state: RestoreState) -> None:
        """Probe outside the lock (a probe may take --preflight-timeout; events must not wait),
        then apply each result under it; a window closed meanwhile ignores them."""
        window = state.window
        assert window is not None
        for probe, run in self.preflight.items():
            if window.preflight.get(probe):
                continue
            ok, detail = await run()
            log.info("preflight", probe=probe, ok=ok, detail=detail)
            async with self._lock:
                self._apply(Preflight(self.clock(), probe, ok))

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
