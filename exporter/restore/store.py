"""Durable restore state: one JSON file under --state-dir, replaced atomically at every change.

Write: temporary file in the same directory, fsync, rename over the old file, fsync the directory,
so a SIGKILL at any instant leaves either the old or the new state, never a torn one. A file that
cannot be read back is moved aside (never deleted: on-call may need it) and reported.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from exporter.restore.window import (
    CAUSES,
    OUTCOMES,
    PHASES,
    Engine,
    LastWindow,
    RestoreState,
    Window,
)

STATE_FILE = "restore-state.json"
FORMAT_VERSION = 1


class StateFileError(Exception):
    """The state file exists but cannot be used; `moved_to` is where it was put aside."""

    def __init__(self, message: str, moved_to: Path | None, unreadable: bool = False) -> None:
        super().__init__(message)
        self.moved_to = moved_to
        self.unreadable = unreadable  # an I/O error, not bad content: nothing was moved


def encode(state: RestoreState) -> bytes:
    doc = {"format": FORMAT_VERSION, "state": asdict(state)}
    return json.dumps(doc, sort_keys=True, allow_nan=False).encode()


def _obj(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"{what}: expected an object")
    return raw


def _number(raw: Any, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ValueError(f"{what}: expected a finite number")
    return float(raw)


def _opt_str(raw: Any, what: str) -> str | None:
    if raw is not None and not isinstance(raw, str):
        raise ValueError(f"{what}: expected a string")
    return raw


def _opt_count(raw: Any, what: str) -> int | None:
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 0):
        raise ValueError(f"{what}: expected a count")
    return raw


def _flag(raw: Any, what: str) -> bool:
    if not isinstance(raw, bool):
        raise ValueError(f"{what}: expected true or false")
    return raw


def _choice(raw: Any, allowed: tuple[str, ...], what: str) -> Any:
    if raw not in allowed:
        raise ValueError(f"{what}: expected one of {', '.join(allowed)}")
    return raw


def _flags(raw: Any, what: str) -> dict[str, bool]:
    return {str(k): _flag(v, f"{what}.{k}") for k, v in _obj(raw or {}, what).items()}


def _engine(raw: Any, what: str) -> Engine | None:
    if raw is None:
        return None
    e = _obj(raw, what)
    generation = e["generation"]
    if not isinstance(generation, str):
        raise ValueError(f"{what}.generation: expected a string")
    return Engine(generation, _opt_str(e.get("image_digest"), f"{what}.image_digest"),
                  _opt_str(e.get("container_id"), f"{what}.container_id"))


def decode(data: bytes) -> RestoreState:
    """The state in `data`; ValueError (or KeyError) on anything but a well-typed state file."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        raise ValueError("unknown state file format")
    raw = _obj(doc["state"], "state")
    window = None
    if (w := raw.get("window")) is not None:
        w = _obj(w, "window")
        window = Window(
            start=_number(w["start"], "window.start"),
            cause=_choice(w["cause"], CAUSES, "window.cause"),
            incumbent=_engine(w.get("incumbent"), "window.incumbent"),
            last_inflight=_opt_count(w.get("last_inflight"), "window.last_inflight"),
            drained=_flag(w.get("drained", False), "window.drained"),
            seen_not_open=_flag(w.get("seen_not_open", False), "window.seen_not_open"),
            restored=_engine(w.get("restored"), "window.restored"),
            preflight=_flags(w.get("preflight"), "window.preflight"),
            restore_started=_flag(w.get("restore_started", False), "window.restore_started"),
            went_away=_flag(w.get("went_away", False), "window.went_away"),
        )
    last = None
    if (lw := raw.get("last_window")) is not None:
        lw = _obj(lw, "last_window")
        last = LastWindow(_number(lw["start"], "last_window.start"),
                          _number(lw["end"], "last_window.end"),
                          _choice(lw["cause"], CAUSES, "last_window.cause"),
                          _choice(lw["outcome"], OUTCOMES, "last_window.outcome"))
    event_ids = raw.get("event_ids") or []
    if not isinstance(event_ids, list) or not all(isinstance(i, str) for i in event_ids):
        raise ValueError("event_ids: expected a list of strings")
    return RestoreState(
        phase=_choice(raw.get("phase", "serving"), PHASES, "phase"),
        window=window,
        last_seen=_engine(raw.get("last_seen"), "last_seen"),
        last_inflight=_opt_count(raw.get("last_inflight"), "last_inflight"),
        unreachable_since=None,  # a failure streak does not survive a restart of the sidecar
        checks=_flags(raw.get("checks"), "checks"),
        last_window=last,
        event_ids=tuple(event_ids),
    )


class StateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / STATE_FILE

    def load(self) -> RestoreState | None:
        """The saved state, None when there is none; StateFileError when it is unusable."""
        self._remove_stale_tmp()
        try:
            data = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None  # no state file can exist there: a fresh start (writes will say why)
        except OSError as exc:
            raise StateFileError(f"cannot read {self.path}: {exc.strerror}", None, True) from None
        try:
            return decode(data)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            aside = self._move_aside()
            raise StateFileError(f"corrupt state file {self.path}: {exc}", aside) from None

    def _move_aside(self) -> Path | None:
        stamp = int(time.time() * 1000)
        for n in range(100):  # never overwrite an earlier corrupt copy
            aside = self.path.with_name(f"{STATE_FILE}.corrupt-{stamp}" + (f"-{n}" if n else ""))
            if aside.exists():
                continue
            try:
                self.path.rename(aside)
            except OSError:
                return None
            return aside
        return None

    def _remove_stale_tmp(self) -> None:
        """Temporary files of sidecars killed mid-write: never the state, always safe to drop."""
        try:
            stale = list(self.directory.glob(f".{STATE_FILE}.*.tmp"))
        except OSError:
            return
        for path in stale:
            try:
                path.unlink()
            except OSError:
                continue

    def save(self, state: RestoreState) -> None:
        """Atomically replace the state file; raises OSError (disk full, read-only) to the caller."""
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
        data = encode(state)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        tmp.replace(self.path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
