"""Durable restore state: one JSON file under --state-dir, replaced atomically whenever what it
holds changes (exporter/durable.py: a SIGKILL at any instant leaves the old or the new state,
never a torn one; the keeper decides when: exporter/restore/keeper.py).
A file that cannot be read back is moved aside (never deleted: on-call may need it) and reported.
"""

from __future__ import annotations

from pathlib import Path

from exporter.durable import atomic_write, move_aside, remove_stale_temporaries
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
        self.writes = 0  # successful saves by this process (each one two fsyncs)

    def load(self) -> RestoreState | None:
        """The saved state, None when there is none; StateFileError when it is unusable."""
        remove_stale_temporaries(self.path)
        try:
            data = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None  # no state file can exist there: a fresh start (writes will say why)
        except OSError as exc:
            raise StateFileError(f"cannot read {self.path}: {exc.strerror}", None, True) from None
        try:
            return decode(data)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            aside = move_aside(self.path)
            raise StateFileError(f"corrupt state file {self.path}: {exc}", aside) from None

    def save(self, state: RestoreState) -> None:
        """Atomically replace the state file; raises OSError (disk full, read-only) to the caller."""
        atomic_write(self.path, encode(state))
        self.writes += 1
