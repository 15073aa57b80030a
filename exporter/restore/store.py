"""Durable restore state: one JSON file under --state-dir, replaced atomically at every change.

Write: temporary file in the same directory, fsync, rename over the old file, fsync the directory,
so a SIGKILL at any instant leaves either the old or the new state, never a torn one. A file that
cannot be read back is moved aside (never deleted: on-call may need it) and reported.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from exporter.restore.window import Engine, LastWindow, RestoreState, Window

STATE_FILE = "restore-state.json"
FORMAT_VERSION = 1


class StateFileError(Exception):
    """The state file exists but cannot be used; `moved_to` is where it was put aside."""

    def __init__(self, message: str, moved_to: Path | None) -> None:
        super().__init__(message)
        self.moved_to = moved_to


def encode(state: RestoreState) -> bytes:
    doc = {"format": FORMAT_VERSION, "state": asdict(state)}
    return json.dumps(doc, sort_keys=True, allow_nan=False).encode()


def _engine(raw: Any) -> Engine | None:
    if raw is None:
        return None
    return Engine(str(raw["generation"]), raw.get("image_digest"), raw.get("container_id"))


def decode(data: bytes) -> RestoreState:
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        raise ValueError("unknown state file format")
    raw = doc["state"]
    window = None
    if (w := raw.get("window")) is not None:
        window = Window(
            start=float(w["start"]),
            cause=w["cause"],
            incumbent=_engine(w.get("incumbent")),
            last_inflight=w.get("last_inflight"),
            drained=bool(w.get("drained", False)),
            seen_not_open=bool(w.get("seen_not_open", False)),
            restored=_engine(w.get("restored")),
            preflight={str(k): bool(v) for k, v in (w.get("preflight") or {}).items()},
            restore_started=bool(w.get("restore_started", False)),
        )
        if window.cause not in ("drain", "event", "unreachable"):
            raise ValueError(f"unknown window cause {window.cause!r}")
    last = None
    if (lw := raw.get("last_window")) is not None:
        last = LastWindow(float(lw["start"]), float(lw["end"]), lw["cause"], lw["outcome"])
    phase = raw.get("phase", "serving")
    if phase not in ("serving", "draining", "drained", "down", "restoring", "verifying"):
        raise ValueError(f"unknown phase {phase!r}")
    return RestoreState(
        phase=phase,
        window=window,
        last_seen=_engine(raw.get("last_seen")),
        last_inflight=raw.get("last_inflight"),
        unreachable_since=None,  # a failure streak does not survive a restart of the sidecar
        checks={str(k): bool(v) for k, v in (raw.get("checks") or {}).items()},
        last_window=last,
        event_ids=tuple(str(i) for i in raw.get("event_ids") or ()),
    )


class StateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / STATE_FILE

    def load(self) -> RestoreState | None:
        """The saved state, None when there is none; StateFileError when it is unusable."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateFileError(f"cannot read {self.path}: {exc.strerror}", None) from None
        try:
            return decode(data)
        except (ValueError, KeyError, TypeError) as exc:
            aside: Path | None = self.path.with_name(
                f"{STATE_FILE}.corrupt-{int(time.time() * 1000)}"
            )
            try:
                self.path.rename(aside)  # type: ignore[arg-type]
            except OSError:
                aside = None
            raise StateFileError(f"corrupt state file {self.path}: {exc}", aside) from None

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
