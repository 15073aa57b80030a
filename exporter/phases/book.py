"""The phase book: the one owner of experiment phases, their state file and their captures.

`begin()` and `end()` run under one lock: check the name (409 on a conflict), take a fresh capture
(the injected `capture`, which runs a poll cycle), write the whole book atomically under
--state-dir, and only then make the change visible. A change that cannot be written is not made
(the caller answers 503 and may retry), so every phase a client was told about survives a SIGKILL.

The file is bounded by its writer: at most `MAX_BOOK_BYTES`, below its reader's limit, the oldest
ended phases dropped first (and past `max_kept` phases). Each phase is encoded once, when it
changes (rendered.py), and GET /experiment/phases serves the bytes made at the last change.

A state file that cannot be decoded (or one over the size a reader accepts) is moved aside (kept
for inspection), the book starts empty and says so (`set_aside`, and a log event); one that
cannot be read (an I/O error, a FIFO, a link) is never overwritten: every change, and GET, is
refused until it can be read again.
"""

from __future__ import annotations

import asyncio
import errno
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import structlog

from exporter import jsonfile
from exporter.defaults import MAX_OPEN_PHASES, MAX_PHASES_KEPT
from exporter.durable import (
    MAX_STATE_BYTES,
    NotRegularFile,
    atomic_write,
    move_aside,
    read_regular,
    remove_stale_temporaries,
)
from exporter.phases.capture import Capture, CaptureError, from_json, to_json
from exporter.phases.deltas import deltas, problems
from exporter.phases.rendered import Rendered, file_bytes, fit

log = structlog.get_logger("helios_exporter.experiment")

STATE_FILE = "experiment-phases.json"
FORMAT_VERSION = 1
# The writer's bound: a quarter below what the reader accepts (durable.MAX_STATE_BYTES).
MAX_BOOK_BYTES = MAX_STATE_BYTES * 3 // 4
# Files written before the book was bounded may be larger: read once at start (and trimmed).
MAX_LEGACY_BYTES = 8 * MAX_STATE_BYTES


class PhaseConflict(Exception):
    """409: begin a name that exists, end one that is not open, or too many open."""


class PhaseUnavailable(Exception):
    """503: no usable capture, or the book could not be read or written; nothing changed."""


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    begin: Capture
    end: Capture | None = None
    begin_note: str | None = None
    end_note: str | None = None

    @property
    def open(self) -> bool:
        return self.end is None


def phase_json(p: Phase) -> dict[str, Any]:
    """A phase as GET /experiment/phases and evidence.json show it."""
    why = [] if p.end is None else problems(p.begin, p.end)
    return {
        "name": p.name,
        "state": "open" if p.open else "ended",
        "valid": None if p.open else not why,
        "invalid_reasons": why,
        "generation": p.begin.generation,
        "notes": {"begin": p.begin_note, "end": p.end_note},
        "begin": to_json(p.begin),
        "end": None if p.end is None else to_json(p.end),
        "deltas": None if p.end is None else deltas(p.begin, p.end),
    }


# -- the state file -----------------------------------------------------------------------------
def stored_json(p: Phase) -> dict[str, Any]:
    """A phase as the phases file holds it."""
    return {"name": p.name, "begin": to_json(p.begin),
            "end": None if p.end is None else to_json(p.end),
            "notes": {"begin": p.begin_note, "end": p.end_note}}


def encode(phases: tuple[Phase, ...]) -> bytes:
    doc = {"format": FORMAT_VERSION, "phases": [stored_json(p) for p in phases]}
    return json.dumps(doc, sort_keys=True, allow_nan=False).encode()


def decode(data: bytes) -> tuple[Phase, ...]:
    doc = jsonfile.loads(data, "the phases file")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        raise ValueError("unknown phases file format")
    raw = doc.get("phases")
    if not isinstance(raw, list):
        raise ValueError("phases: expected a list")
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ValueError(f"phases[{i}]: expected an object with a name")
        notes = entry.get("notes") or {}
        if not isinstance(notes, dict) or not all(
                v is None or isinstance(v, str) for v in notes.values()):
            raise ValueError(f"phases[{i}].notes: expected strings")
        end = entry.get("end")
        out.append(Phase(entry["name"], from_json(entry.get("begin"), f"phases[{i}].begin"),
                         None if end is None else from_json(end, f"phases[{i}].end"),
                         notes.get("begin"), notes.get("end")))
    if len({p.name for p in out}) != len(out):
        raise ValueError("phases: a name appears twice")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SetAside:
    """A phases file found unusable at start and moved aside: where, and why."""
    path: str | None  # None: it could not even be moved (then it is left where it was)
    reason: str


class PhaseStore:
    def __init__(self, directory: Path) -> None:
        self.path = directory / STATE_FILE
        self.set_aside: SetAside | None = None

    def load(self) -> tuple[Phase, ...]:
        """The saved phases (none without a file). OSError when the file cannot be read or is
        not a regular file (a FIFO, a link: never followed, never blocked on); a file that
        cannot be decoded, or is over the size read, is moved aside, reported (`set_aside`) and
        the book starts empty."""
        remove_stale_temporaries(self.path)
        try:
            data = read_regular(self.path, MAX_LEGACY_BYTES)
        except NotRegularFile as exc:
            if exc.errno != errno.EFBIG:
                raise
            return self._move_aside(str(exc))
        if data is None:
            return ()
        try:
            return decode(data)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            return self._move_aside(str(exc)[:300])

    def save(self, data: bytes) -> None:
        atomic_write(self.path, data)

    def _move_aside(self, reason: str) -> tuple[Phase, ...]:
        aside = move_aside(self.path)
        self.set_aside = SetAside(None if aside is None else str(aside), reason)
        log.error("phases_state_unusable", error=reason,
                  moved_to=str(aside) if aside else None)
        if aside is None:  # still there: never written over
            raise OSError(errno.EIO, f"unusable and could not be moved aside: {reason}")
        return ()


# -- the book -------------------------------------------------------------------------------------
class PhaseBook:
    def __init__(
        self,
        store: PhaseStore,
        capture: Callable[[], Awaitable[Capture]],
        *,
        max_open: int = MAX_OPEN_PHASES,
        max_kept: int = MAX_PHASES_KEPT,
        max_bytes: int = MAX_BOOK_BYTES,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._capture = capture
        self._max_open = max_open
        self._max_kept = max_kept
        self._max_bytes = max_bytes
        self._on_change = on_change
        self._phases: tuple[Phase, ...] = ()
        self._lock = asyncio.Lock()
        self._unreadable: str | None = None  # why the state file could not be read
        self._rendered = Rendered(stored_json, phase_json)
        self._answer = b""
        self._render()

    @property
    def phases(self) -> tuple[Phase, ...]:
        return self._phases

    @property
    def unreadable(self) -> str | None:
        """Why the phases file cannot be read now (None: it can, or there is none)."""
        return self._unreadable

    def answer(self) -> bytes:
        """GET /experiment/phases, as made at the book's last change (served as is)."""
        return self._answer

    def open_phases(self) -> Mapping[str, float]:
        """Open phase name -> the time its begin capture was taken."""
        return MappingProxyType({p.name: p.begin.at for p in self._phases if p.open})

    def load(self) -> None:
        try:
            phases = self._store.load()
        except OSError as exc:
            if self._unreadable is None:
                log.error("phases_state_unreadable", path=str(self._store.path),
                          error=exc.strerror or str(exc))
            self._unreadable = f"cannot read {self._store.path}: {exc.strerror or exc}"
            return
        if self._unreadable is not None:
            log.info("phases_state_readable_again", path=str(self._store.path))
        self._unreadable = None
        kept = self._fit(phases[-self._max_kept:])
        if kept is None:  # open phases alone over the bound: keep what the reader read
            kept = phases
        if len(kept) < len(phases):
            log.warning("phases_trimmed", kept=len(kept), dropped=len(phases) - len(kept),
                        max_bytes=self._max_bytes, max_kept=self._max_kept)
        self._phases = kept
        self._render()
        if self._phases:
            log.info("phases_loaded", phases=len(self._phases),
                     open=[p.name for p in self._phases if p.open])
        if self._on_change is not None:
            self._on_change()

    async def begin(self, name: str, note: str | None) -> Phase:
        async with self._lock:
            self._readable()
            existing = self._find(name)
            if existing is not None:
                raise PhaseConflict(
                    f"phase {name!r} is open since its begin capture" if existing.open else
                    f"phase {name!r} already ended; phase names are unique (use a new name, "
                    "e.g. the next repetition number)")
            if sum(p.open for p in self._phases) >= self._max_open:
                raise PhaseConflict(f"{self._max_open} phases are open already; end one first")
            phase = Phase(name, await self._fresh(), begin_note=note)
            await self._commit((*self._trimmed(), phase))
            log.info("phase_begun", phase=name, generation=phase.begin.generation)
            return phase

    async def end(self, name: str, note: str | None) -> Phase:
        async with self._lock:
            self._readable()
            existing = self._find(name)
            if existing is None or not existing.open:
                raise PhaseConflict(f"phase {name!r} is not open" if existing is None
                                    else f"phase {name!r} already ended")
            phase = replace(existing, end=await self._fresh(), end_note=note)
            await self._commit(tuple(phase if p.name == name else p for p in self._phases))
            assert phase.end is not None
            log.info("phase_ended", phase=name, generation=phase.end.generation,
                     invalid=problems(phase.begin, phase.end) or None)
            return phase

    # -- inside --------------------------------------------------------------------------------
    def _readable(self) -> None:
        if self._unreadable is not None:
            self.load()
        if self._unreadable is not None:
            raise PhaseUnavailable(self._unreadable + " (not overwritten; fix the file or its "
                                   "permissions)")

    def _find(self, name: str) -> Phase | None:
        return next((p for p in self._phases if p.name == name), None)

    async def _fresh(self) -> Capture:
        try:
            return await self._capture()
        except CaptureError as exc:
            raise PhaseUnavailable(f"no fresh capture: {exc}") from None

    def _trimmed(self) -> tuple[Phase, ...]:
        """The book with room for one more: the oldest ended phases dropped past max_kept."""
        phases = list(self._phases)
        while len(phases) >= self._max_kept:
            oldest = next((p for p in phases if not p.open), None)
            if oldest is None:
                break
            phases.remove(oldest)
        return tuple(phases)

    def _fit(self, phases: tuple[Phase, ...]) -> tuple[Phase, ...] | None:
        """`phases` less the oldest ended ones, so that the file stays within max_bytes."""
        sizes = [(p.open, len(self._rendered.entry(p.name, p).stored)) for p in phases]
        keep = fit(sizes, self._max_bytes)
        return None if keep is None else tuple(phases[i] for i in keep)

    async def _commit(self, phases: tuple[Phase, ...]) -> None:
        fitted = self._fit(phases)
        if fitted is None:
            self._rendered.keep_only(p.name for p in self._phases)
            raise PhaseUnavailable(f"the open phases alone are over the phases file's "
                                   f"{self._max_bytes:,} bytes; end one first; nothing changed")
        data = file_bytes(self._rendered.entry(p.name, p).stored for p in fitted)
        try:
            # In a worker thread (under the book's lock: in order): its two fsyncs never hold
            # up the event loop, /healthz and /metrics.
            await asyncio.to_thread(self._store.save, data)
        except OSError as exc:
            self._rendered.keep_only(p.name for p in self._phases)
            error = f"{type(exc).__name__}: {exc.strerror or exc}"
            log.error("phases_state_write_failed", path=str(self._store.path), error=error)
            raise PhaseUnavailable(f"could not write {self._store.path}: {error}; "
                                   "nothing changed") from None
        if len(fitted) < len(phases):
            log.info("phases_trimmed", kept=len(fitted), dropped=len(phases) - len(fitted),
                     max_bytes=self._max_bytes)
        self._phases = fitted
        self._render()
        if self._on_change is not None:
            self._on_change()

    def _render(self) -> None:
        """The GET answer, joined from each phase's bytes (made once, when the phase changed)."""
        self._rendered.keep_only(p.name for p in self._phases)
        aside = self._store.set_aside
        head = b'{"phases": [' + b", ".join(
            self._rendered.entry(p.name, p).shown for p in self._phases) + b"]"
        tail = b', "set_aside": ' + (b"null" if aside is None else json.dumps(
            {"path": aside.path, "reason": aside.reason}).encode()) + b"}"
        self._answer = head + tail
