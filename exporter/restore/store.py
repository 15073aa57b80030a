"""Durable restore state: one JSON file under --state-dir, replaced atomically whenever what it
holds changes (exporter/durable.py: a SIGKILL at any instant leaves the old or the new state,
never a torn one; the keeper decides when: exporter/restore/keeper.py).

Reading never follows a symbolic link and never blocks on a FIFO: anything but a regular file at
the path is reported and held (never read, never written over) like a file that cannot be read.
A file of a newer release loads with what this one understands (exporter/restore/codec.py): its
unknown fields are kept and written back, its unknown values reported. Only a file that is not a
state file at all is moved aside (never deleted: on-call may need it) and reported.

What it writes, it reads back: the file stays under the reader's limit (MAX_STATE_BYTES; the
unknown fields kept from a newer release are dropped, and reported, before it would pass it),
and a value that cannot be encoded is a write error (StateWriteError), never a crash.
"""

from __future__ import annotations

import errno
from pathlib import Path

import structlog

from exporter.durable import (
    MAX_STATE_BYTES,
    NotRegularFile,
    atomic_write,
    move_aside,
    read_regular,
    remove_stale_temporaries,
)
from exporter.restore.codec import FORMAT_VERSION, Decoded, Extra, decode, decode_report, encode
from exporter.restore.model import RestoreState

__all__ = ["FORMAT_VERSION", "STATE_FILE", "Decoded", "StateFileError", "StateStore",
           "StateWriteError", "decode", "encode"]

log = structlog.get_logger("helios_exporter.restore")

STATE_FILE = "restore-state.json"


class StateWriteError(OSError):
    """The state could not be encoded within the reader's limit: a write error like a full disk."""


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
        """Atomically replace the state file; raises OSError (disk full, read-only, or
        StateWriteError: not encodable within the limit) to the caller."""
        atomic_write(self.path, self.encoded(state))
        self.writes += 1

    def encoded(self, state: RestoreState, limit: int = MAX_STATE_BYTES) -> bytes:
        """`state` as the file's bytes, at most `limit` of them."""
        try:
            data = encode(state, self.extra)
            if len(data) > limit and self.extra != Extra():
                dropped = len(data)
                self.extra = Extra()  # a newer release's fields: they go before the state does
                self.problems = (*self.problems, f"unknown fields: dropped, the file would have "
                                 f"been {dropped} bytes, over the {limit} read")
                log.warning("restore_state_unknown_fields_dropped", bytes=dropped, limit=limit)
                data = encode(state)
        except (ValueError, TypeError, RecursionError, OverflowError) as exc:
            raise StateWriteError(errno.EINVAL, f"not encodable: {type(exc).__name__}: "
                                  f"{str(exc)[:200]}") from None
        if len(data) > limit:
            raise StateWriteError(errno.EFBIG, f"{len(data)} bytes, over the {limit} read")
        return data
