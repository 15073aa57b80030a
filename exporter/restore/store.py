"""Durable restore state: one JSON file under --state-dir, replaced atomically whenever what it
holds changes (exporter/durable.py: a SIGKILL at any instant leaves the old or the new state,
never a torn one; the keeper decides when: exporter/restore/keeper.py).

Reading never follows a symbolic link and never blocks on a FIFO: anything but a regular file at
the path is reported and held (never read, never written over) like a file that cannot be read.
A file of a newer release loads with what this one understands (exporter/restore/codec.py): its
unknown fields are kept and written back, its unknown values reported. Only a file that is not a
state file at all is moved aside (never deleted: on-call may need it) and reported.
"""

from __future__ import annotations

from pathlib import Path

from exporter.durable import (
    NotRegularFile,
    atomic_write,
    move_aside,
    read_regular,
    remove_stale_temporaries,
)
from exporter.restore.codec import FORMAT_VERSION, Decoded, Extra, decode, decode_report, encode
from exporter.restore.model import RestoreState

__all__ = ["FORMAT_VERSION", "STATE_FILE", "Decoded", "StateFileError", "StateStore", "decode",
           "encode"]

STATE_FILE = "restore-state.json"


class StateFileError(Exception):
    """The state file exists but cannot be used; `moved_to` is where it was put aside."""

    def __init__(self, message: str, moved_to: Path | None, unreadable: bool = False) -> None:
        super().__init__(message)
        self.moved_to = moved_to
        self.unreadable = unreadable  # an I/O error or not a regular file: nothing was moved


class StateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / STATE_FILE
        self.writes = 0  # successful saves by this process (each one two fsyncs)
        self.extra = Extra()  # fields of a newer release, written back unchanged
        self.problems: tuple[str, ...] = ()  # what the last load did not understand

    def load(self) -> RestoreState | None:
        """The saved state, None when there is none; StateFileError when it is unusable."""
        decoded = self.load_report()
        return None if decoded is None else decoded.state

    def load_report(self) -> Decoded | None:
        """As `load`, with what was not understood (also kept in `problems`)."""
        remove_stale_temporaries(self.path)
        try:
            data = read_regular(self.path)
        except NotRegularFile as exc:
            raise StateFileError(f"{exc.strerror}: neither read nor written over", None,
                                 True) from None
        except OSError as exc:
            raise StateFileError(f"cannot read {self.path}: {exc.strerror}", None, True) from None
        if data is None:
            return None  # no state file can exist there: a fresh start (writes will say why)
        try:
            decoded = decode_report(data)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            aside = move_aside(self.path)
            raise StateFileError(f"corrupt state file {self.path}: {exc}", aside) from None
        self.extra, self.problems = decoded.extra, decoded.problems
        return decoded

    def save(self, state: RestoreState) -> None:
        """Atomically replace the state file; raises OSError (disk full, read-only) to the caller."""
        atomic_write(self.path, encode(state, self.extra))
        self.writes += 1
