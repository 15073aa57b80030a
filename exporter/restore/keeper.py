"""The restore keeper: the one owner of the restore window, its state file, its events and preflight.

Everything that changes the window goes through here, under one lock (a poll cycle, the events
API and the preflight task may race): `load()` at start, `observe()` once per poll,
`apply_event()` per POST, and `aclose()` at shutdown. Readers get `view()`, an immutable picture
of the keeper.

Persistence never loses the window: a failed write leaves the state dirty and every poll retries
it; a state file that exists but cannot be read (or is not a regular file) is never written over
(it may hold an open window) and is read again every poll until it can be; then the two are
merged (exporter/restore/merge.py). Writes and their fsyncs run in a worker thread
(`asyncio.to_thread`), still under the lock, so they land in the order of the changes and
nothing else on the event loop (/healthz, /metrics) waits on the disk.

Preflight runs as the keeper's own task, never inside the poll cycle: each due probe runs with a
deadline, its result (or its failure, with the reason) is applied when it comes, and the cycle
publishes whatever is known by then.
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
from exporter.labels import ErrorReason
from exporter.restore.merge import merge
from exporter.restore.store import Decoded, StateFileError, StateStore
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
from exporter.snapshot.model import Snapshot

log = structlog.get_logger("helios_exporter.restore")

PreflightProbe = Callable[[], Awaitable[tuple[bool, str]]]
# helios_restore_events_total{result}: `unavailable` was answered 503 (not applied: the state
# could not be written, or the file on disk cannot be read, or too many events wait).
EVENT_RESULTS: Final = ("accepted", "duplicate", "refused", "unavailable")
# Events waiting for the keeper's lock at most: the poll cycle waits behind no more writes than
# these (a burst beyond is answered 503 with Retry-After, and applies when retried).
MAX_WAITING_EVENTS: Final = 4
# A poll that failed for one of these found no engine serving (docs/interface.md section 6.1):
# refused, timed out, or an HTTP error status (a crashed engine behind a proxy, one starting up).
# Any other failure (schema, decode, unsupported_version, too_large) is an engine that answered
# without a valid snapshot: a source error (HeliosEngineSnapshotFailing), not an outage, so it
# never opens a window.
UNREACHABLE: Final = frozenset({ErrorReason.CONNECT, ErrorReason.TIMEOUT, ErrorReason.HTTP_STATUS,
                                ErrorReason.OTHER})


@dataclass(frozen=True, slots=True)
class RestoreView:
    """The keeper as collectors and /status see it; replaced, never changed."""

    state: RestoreState = field(default_factory=RestoreState)
    state_file: Path | None = None
    write_errors: int = 0
    corrupt_files: int = 0
    read_errors: int = 0
    last_write_error: str = ""
    state_file_problems: tuple[str, ...] = ()  # what the file held that this release did not read
    last_read_error: str = ""  # why the state file is held (unreadable, not a regular file)
    # The state file on disk cannot be read: what it holds (an open window?) is unknown.
    state_unknown: bool = False
    events: Mapping[tuple[str, str], int] = field(
        default_factory=lambda: MappingProxyType({}))  # (event, result) -> count


class EventOutcome(NamedTuple):
    duplicate: bool
    state: RestoreState  # after the event
    refused: str | None = None  # why the event was refused (409: it changed nothing)
    # Why it was not applied now (503, retry: the same id applies then): the state could not be
    # written (the change was rolled back), the file on disk cannot be read, or too many wait.
    unavailable: str | None = None


class RestoreKeeper:
    def __init__(
        self,
        store: StateStore,
        bounds: Bounds,
        preflight: Mapping[str, PreflightProbe] | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] | None = None,
        preflight_deadline: float = 30.0,
    ) -> None:
        self._store = store
        self._bounds = bounds
        self._preflight = dict(preflight or {})
        self._clock = clock
        # Durations (the down grace) on this clock, never the wall clock; None: the `now` of
        # each poll (tests that inject one timeline).
        self._monotonic = monotonic
        self._preflight_deadline = preflight_deadline
        self._state = RestoreState()
        self._lock = asyncio.Lock()  # poll cycle vs events API vs preflight
        self._dirty = False  # the state in memory is not on disk yet
        self._blocked = False  # the state file exists but could not be read
        self._write_errors = 0
        self._corrupt_files = 0
        self._read_errors = 0
        self._last_write_error = ""  # the last one, kept after writes land again (history)
        self._failing = False  # the last write attempt failed or was held
        self._last_read_error = ""
        self._events: Counter[tuple[str, str]] = Counter()
        self._probes: asyncio.Task[None] | None = None
        self._waiting = 0  # events waiting for the lock
        self._changed: list[Callable[[], None]] = []

    @property
    def bounds(self) -> Bounds:
        return self._bounds

    @property
    def probes(self) -> tuple[str, ...]:
        """The configured preflight probes."""
        return tuple(self._preflight)

    def view(self) -> RestoreView:
        return RestoreView(self._state, self._store.path, self._write_errors, self._corrupt_files,
                           self._read_errors, self._last_write_error, self._store.problems,
                           self._last_read_error if self._blocked else "",
                           self._blocked, MappingProxyType(dict(self._events)))

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever the state changes outside a poll (loaded, an event): the
        poll loop republishes its view then."""
        self._changed.append(callback)

    def _notify(self) -> None:
        for callback in self._changed:
            callback()

    # -- the ways in ---------------------------------------------------------------------------
    def load(self) -> None:
        """Read the saved state at start (a small, bounded read before anything is served)."""
        self._loaded(self._read())
        self._notify()

    async def observe(self, now: float, snapshot: Snapshot | None,
                      reason: ErrorReason | None = None) -> RestoreState:
        """One poll of the engine: its snapshot, or None and why the poll failed (a reason
        outside UNREACHABLE is an engine that answered: not an outage). Starts the preflight
        task when probes are due; never waits for it."""
        reachable = snapshot is not None or (reason is not None and reason not in UNREACHABLE)
        async with self._lock:
            if self._blocked:
                self._loaded(await asyncio.to_thread(self._read))
            mono = None if self._monotonic is None else self._monotonic()
            self._apply(Poll(now, snapshot, mono, reachable))
            await self._persist()  # when the poll changed what the file holds, or to retry
        self._start_preflight()
        return self._state

    async def apply_event(self, event_id: str, kind: EventKind) -> EventOutcome:
        """One events-API event, applied only once it is on disk. A repeated id of the same
        kind is a duplicate and changes nothing; an id used for another kind, or an event
        refused in this state (exporter/restore/answers.py), is refused and changes nothing;
        one that cannot be made durable now is rolled back (`unavailable`, its id not used)."""
        if self._waiting >= MAX_WAITING_EVENTS:
            return self._counted(kind, "unavailable", EventOutcome(
                False, self._state, unavailable=f"{self._waiting} events are being written: "
                "retry"))
        self._waiting += 1
        try:
            await self._lock.acquire()
        finally:
            self._waiting -= 1
        try:
            outcome = await self._event(event_id, kind)
        finally:
            self._lock.release()
        self._notify()
        return outcome

    async def _event(self, event_id: str, kind: EventKind) -> EventOutcome:
        if self._blocked:
            self._loaded(await asyncio.to_thread(self._read))  # readable again, or still held
            await self._persist()  # the merged state (held while still unreadable)
        if self._blocked:
            return self._counted(kind, "unavailable", EventOutcome(
                False, self._state, unavailable="the state file cannot be read (it may hold "
                f"an open window): {self._last_read_error}"))
        before, dirty = self._state, self._dirty
        if event_id in before.event_ids:
            used = before.event_kinds.get(event_id, kind)
            if used != kind:
                return self._counted(kind, "refused", EventOutcome(
                    False, before, f"the id {event_id!r} was used for {used}: an id names one "
                    "event"))
            return self._counted(kind, "duplicate", EventOutcome(True, before))
        refused = refusal(before, kind)
        if refused is not None:
            return self._counted(kind, "refused", EventOutcome(False, before, refused))
        mono = None if self._monotonic is None else self._monotonic()
        state = self._apply(Event(self._clock(), event_id, kind, mono))
        if not await self._persist():
            self._state, self._dirty = before, dirty  # not on disk: as if it never came
            logs.CONTEXT["phase"] = before.phase
            log.warning("restore_event_rolled_back", event_id=event_id, restore_event=kind,
                        error=self._last_write_error)
            return self._counted(kind, "unavailable", EventOutcome(
                False, before, unavailable=f"the state could not be written "
                f"({self._last_write_error}): nothing changed"))
        return self._counted(kind, "accepted", EventOutcome(False, state))

    def _counted(self, kind: EventKind, result: str, outcome: EventOutcome) -> EventOutcome:
        self._events[(kind, result)] += 1
        return outcome

    async def settle(self) -> None:
        """Wait for the running preflight probes (tests, and shutdown)."""
        task = self._probes
        if task is not None and task.get_loop() is asyncio.get_running_loop():
            await asyncio.gather(task, return_exceptions=True)

    async def aclose(self) -> None:
        """Stop the probes, then write the state once more (held while the file is unreadable)."""
        task = self._probes
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        async with self._lock:
            await self._persist()

    # -- reading -------------------------------------------------------------------------------
    def _read(self) -> Decoded | StateFileError | None:
        try:
            return self._store.load_report()
        except StateFileError as exc:
            return exc

    def _loaded(self, got: Decoded | StateFileError | None) -> None:
        if isinstance(got, StateFileError):
            if got.unreadable:
                # It may hold an open window: never overwrite it; read it again every cycle.
                if not self._blocked:
                    self._read_errors += 1
                    log.error("restore_state_unreadable", error=str(got),
                              path=str(self._store.path))
                self._blocked, self._last_read_error = True, str(got)
                return
            self._corrupt_files += 1
            log.error("restore_state_unusable", error=str(got),
                      moved_to=str(got.moved_to) if got.moved_to else None)
            if self._blocked:  # moved aside: nothing left to merge, the path is free
                self._blocked = False
                self._dirty = True
            return
        if got is not None and got.problems:
            log.warning("restore_state_not_understood", problems=list(got.problems[:20]),
                        path=str(self._store.path))
        saved = got.state if got is not None else None
        if self._blocked:
            self._blocked = False
            log.info("restore_state_readable_again", path=str(self._store.path))
            if saved is not None:
                self._state = merge(saved, self._state)
                logs.CONTEXT["phase"] = self._state.phase
            self._dirty = True  # the merged state is written by the caller, under the lock
            return
        if saved is not None:
            self._state = saved
            logs.CONTEXT["phase"] = saved.phase
            log.info("restore_state_loaded", phase=saved.phase,
                     window_start=saved.window.start if saved.window else None)

    # -- inside --------------------------------------------------------------------------------
    @staticmethod
    def _due(before: RestoreState, after: RestoreState) -> bool:
        """Whether the file must be written: when what it holds changes (`restarted`: not a
        failure streak, not the in-flight count of a poll outside a window, so a quiet engine
        costs no fsync per poll; inside a window every poll is evidence)."""
        return restarted(after) != restarted(before)

    def _apply(self, inp: Input) -> RestoreState:
        before = self._state
        after = step(before, inp, self._bounds)
        if after != before:
            self._state = after
            logs.CONTEXT["phase"] = after.phase
            if self._due(before, after):
                self._dirty = True
            if after.phase != before.phase or (after.window is None) != (before.window is None):
                log.info("restore_transition", phase=after.phase, previous=before.phase,
                         window_start=after.window.start if after.window else None,
                         cause=after.window.cause if after.window else None,
                         checks=after.checks if after.window is None else None)
        return self._state

    async def _persist(self) -> bool:
        """Write the state in a worker thread (called under the lock: writes keep their order);
        on failure it stays dirty and every cycle retries. A write cancelled while its thread
        runs (shutdown) still holds the store's write lock: the next one waits for it."""
        if not self._dirty:
            return True
        if self._held():
            return False
        state = self._state
        try:
            await asyncio.to_thread(self._store.save, state)
        except OSError as exc:  # the store reports an encoding error as one (StateWriteError)
            return self._failed(exc)
        return self._written(state)

    def _held(self) -> bool:
        if not self._blocked:
            return False
        if not (self._failing and self._last_write_error.startswith("state file unreadable")):
            self._failing = True
            self._write_errors += 1
            self._last_write_error = "state file unreadable: not overwritten"
            log.error("restore_state_write_held", path=str(self._store.path),
                      error=self._last_write_error)
        return True

    def _failed(self, exc: OSError) -> bool:
        self._failing = True
        self._write_errors += 1
        self._last_write_error = f"{type(exc).__name__}: {exc.strerror or exc}"
        log.error("restore_state_write_failed", error=self._last_write_error,
                  path=str(self._store.path))
        return False

    def _written(self, state: RestoreState) -> bool:
        if self._failing:
            log.info("restore_state_written_again", path=str(self._store.path))
            self._failing = False
        self._dirty = self._state is not state  # changed meanwhile: written at the next turn
        return True

    # -- preflight, its own task ---------------------------------------------------------------
    def _start_preflight(self) -> None:
        state = self._state
        if state.phase != "verifying" or not self._preflight or state.window is None:
            return
        running = self._probes
        loop = asyncio.get_running_loop()
        if running is not None and not running.done() and running.get_loop() is loop:
            return
        due = [p for p in self._preflight if not state.window.preflight.get(p)]
        if due:
            self._probes = loop.create_task(self._run_preflight(due))

    async def _run_preflight(self, due: list[str]) -> None:
        """Every due probe at once, each within the deadline; each result is applied under the
        lock when it comes (a window closed meanwhile ignores it)."""
        await asyncio.gather(*(self._one_probe(p) for p in due))

    async def _one_probe(self, probe: str) -> None:
        try:
            ok, detail = await asyncio.wait_for(self._preflight[probe](),
                                                self._preflight_deadline)
        except TimeoutError:
            ok, detail = False, f"no answer within {self._preflight_deadline:g} s"
        except Exception as exc:  # a probe's failure is a failed check, never a failed cycle
            ok, detail = False, f"probe failed: {type(exc).__name__}"
        log.info("preflight", probe=probe, ok=ok, detail=detail)
        async with self._lock:
            mono = None if self._monotonic is None else self._monotonic()
            self._apply(Preflight(self._clock(), probe, ok, mono))
            await self._persist()
