"""The restore keeper: the one owner of the restore window, its state file, its events and preflight.

Everything that changes the window goes through here, under one lock (a poll cycle and the events
API may race): `load()` at start, `observe()` once per poll, `apply_event()` per accepted POST, and
`flush()` at shutdown. Readers get `view()`, an immutable picture of the keeper.

Persistence never loses the window: a failed write leaves the state dirty and every poll retries
it; a state file that exists but cannot be read is never overwritten (it may hold an open window)
and is read again every poll until it can be.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final, NamedTuple

import structlog

from exporter import logs
from exporter.restore.store import StateFileError, StateStore
from exporter.restore.window import (
    Bounds,
    Event,
    EventKind,
    Input,
    Poll,
    Preflight,
    RestoreState,
    refusal,
    restarted,
    step,
)
from exporter.snapshot import Snapshot

log = structlog.get_logger("helios_exporter.restore")

PreflightProbe = Callable[[], Awaitable[tuple[bool, str]]]
EVENT_RESULTS: Final = ("accepted", "duplicate", "refused")  # helios_restore_events_total{result}


@dataclass(frozen=True, slots=True)
class RestoreView:
    """The keeper as collectors and /status see it; replaced, never changed."""

    state: RestoreState = field(default_factory=RestoreState)
    state_file: Path | None = None
    write_errors: int = 0
    corrupt_files: int = 0
    read_errors: int = 0
    last_write_error: str = ""
    events: Mapping[tuple[str, str], int] = field(
        default_factory=lambda: MappingProxyType({}))  # (event, result) -> count


class EventOutcome(NamedTuple):
    duplicate: bool
    state: RestoreState  # after the event
    persisted: bool  # the state on disk is the state in memory
    refused: str | None = None  # why the event was refused (it changed nothing)


class RestoreKeeper:
    def __init__(
        self,
        store: StateStore,
        bounds: Bounds,
        preflight: Mapping[str, PreflightProbe] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._bounds = bounds
        self._preflight = dict(preflight or {})
        self._clock = clock
        self._state = RestoreState()
        self._lock = asyncio.Lock()  # poll cycle vs events API
        self._dirty = False  # the state in memory is not on disk yet (a write failed)
        self._blocked = False  # the state file exists but could not be read
        self._write_errors = 0
        self._corrupt_files = 0
        self._read_errors = 0
        self._last_write_error = ""
        self._events: Counter[tuple[str, str]] = Counter()

    @property
    def bounds(self) -> Bounds:
        return self._bounds

    @property
    def probes(self) -> tuple[str, ...]:
        """The configured preflight probes."""
        return tuple(self._preflight)

    def view(self) -> RestoreView:
        return RestoreView(self._state, self._store.path, self._write_errors, self._corrupt_files,
                           self._read_errors, self._last_write_error,
                           MappingProxyType(dict(self._events)))

    # -- the four ways in ----------------------------------------------------------------------
    def load(self) -> None:
        """Read the saved state at start (and again each poll while the file is unreadable)."""
        try:
            saved = self._store.load()
        except StateFileError as exc:
            if exc.unreadable:
                # It may hold an open window: never overwrite it; read it again every cycle.
                if not self._blocked:
                    self._read_errors += 1
                    log.error("restore_state_unreadable", error=str(exc),
                              path=str(self._store.path))
                self._blocked = True
            else:
                self._corrupt_files += 1
                log.error("restore_state_unusable", error=str(exc),
                          moved_to=str(exc.moved_to) if exc.moved_to else None)
            return
        if self._blocked:
            self._blocked = False
            log.info("restore_state_readable_again", path=str(self._store.path))
            if saved is not None and saved.window is not None and self._state.window is None:
                self._state = saved  # the durable window wins over a fresh start
            self._persist()
            return
        if saved is not None:
            self._state = saved
            logs.CONTEXT["phase"] = saved.phase
            log.info("restore_state_loaded", phase=saved.phase,
                     window_start=saved.window.start if saved.window else None)

    async def observe(self, now: float, snapshot: Snapshot | None) -> RestoreState:
        """One poll of the engine (None: no valid snapshot); runs due preflight probes."""
        async with self._lock:
            if self._blocked:
                self.load()
            before = self._state
            state = self._apply(Poll(now, snapshot))
            if self._dirty and state is before:  # nothing new (so not tried), not on disk yet
                self._persist()
        if state.phase == "verifying" and self._preflight:
            await self._run_preflight(state)
        return self._state

    async def apply_event(self, event_id: str, kind: EventKind) -> EventOutcome:
        """One events-API event; a repeated id is counted as a duplicate and changes nothing, an
        event refused in this state (`window.refusal`) changes nothing and is not recorded."""
        async with self._lock:
            if event_id in self._state.event_ids:
                self._events[(kind, "duplicate")] += 1
                return EventOutcome(True, self._state, not self._dirty)
            refused = refusal(self._state, kind)
            if refused is not None:
                self._events[(kind, "refused")] += 1
                return EventOutcome(False, self._state, not self._dirty, refused)
            state = self._apply(Event(self._clock(), event_id, kind))
            self._events[(kind, "accepted")] += 1
            return EventOutcome(False, state, not self._dirty)

    def flush(self) -> None:
        """Write the state once more at shutdown (held while the file is unreadable)."""
        self._persist()

    # -- inside --------------------------------------------------------------------------------
    def _apply(self, inp: Input) -> RestoreState:
        before = self._state
        after = step(before, inp, self._bounds)
        if after != before:
            self._state = after
            logs.CONTEXT["phase"] = after.phase
            # Written when what the file holds changes (`restarted`: not a failure streak, not
            # the in-flight count of a poll outside a window, so a quiet engine costs no fsync
            # per poll; inside a window every poll is evidence), or to retry a failed write.
            if self._dirty or restarted(after) != restarted(before):
                self._persist()
            if after.phase != before.phase or (after.window is None) != (before.window is None):
                log.info("restore_transition", phase=after.phase, previous=before.phase,
                         window_start=after.window.start if after.window else None,
                         cause=after.window.cause if after.window else None,
                         checks=after.checks if after.window is None else None)
        return self._state

    def _persist(self) -> bool:
        """Write the state; on failure it stays dirty and every cycle retries."""
        if self._blocked:
            if not self._dirty:
                self._write_errors += 1
                self._last_write_error = "state file unreadable: not overwritten"
                log.error("restore_state_write_held", path=str(self._store.path),
                          error=self._last_write_error)
            self._dirty = True
            return False
        try:
            self._store.save(self._state)
        except OSError as exc:
            self._dirty = True
            self._write_errors += 1
            self._last_write_error = f"{type(exc).__name__}: {exc.strerror or exc}"
            log.error("restore_state_write_failed", error=self._last_write_error,
                      path=str(self._store.path))
            return False
        if self._dirty:
            log.info("restore_state_written_again", path=str(self._store.path))
        self._dirty = False
        return True

    async def _run_preflight(self, state: RestoreState) -> None:
        """Probe outside the lock (a probe may take --preflight-timeout; events must not wait),
        then apply each result under it; a window closed meanwhile ignores them."""
        window = state.window
        assert window is not None
        for probe, run in self._preflight.items():
            if window.preflight.get(probe):
                continue
            ok, detail = await run()
            log.info("preflight", probe=probe, ok=ok, detail=detail)
            async with self._lock:
                self._apply(Preflight(self._clock(), probe, ok))
