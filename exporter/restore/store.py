"""Durable restore state: one JSON file under --state-dir, replaced atomically at every change.

Write: temporary file in the same directory, fsync, rename over the old file, fsync the directory,
so a SIGKILL at any instant leaves either the old or the new state, never a torn one. A file that
cannot be read back is moved aside (never deleted: on-call may need it) and reported.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from exporter.restore.codec import FORMAT_VERSION, decode, encode
from exporter.restore.model import RestoreState

__all__ = ["FORMAT_VERSION", "STATE_FILE", "StateFileError", "StateStore", "decode", "encode"]

STATE_FILE = "restore-state.json"


class StateFileError(Exception):
    """The state file exists but cannot be used; `moved_to` is where it was put aside."""

    def __init__(self, message: str, moved_to: Path | None, unreadable: bool = False) -> None:
        super().__init__(message)
        self.moved_to = moved_to
        self.unreadable = unreadable  # an I/O error, not bad content: nothing was moved


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
