"""exporter/durable.py: one write at a time, each with a temporary name of its own; a `.lock`
that exists but cannot be locked refuses."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from exporter import durable
from exporter.durable import DirectoryLock, LockUnusable, atomic_write


def test_a_second_write_waits_for_the_one_in_flight_and_never_shares_its_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM during a slow write started a second write on the same per-pid temporary file: a
    write that landed was reported failed, and the live file was for a moment the second one's
    unfinished content. Now the second waits, on a name of its own."""
    target = tmp_path / "state.json"
    in_fsync, release = threading.Event(), threading.Event()
    names: list[str] = []
    real_fsync, real_name = os.fsync, durable.temporary_name

    def slow_fsync(fd: int) -> None:
        if not in_fsync.is_set():
            in_fsync.set()
            release.wait(10)
        real_fsync(fd)

    def named(path: Path) -> Path:
        tmp = real_name(path)
        names.append(tmp.name)
        return tmp

    monkeypatch.setattr(os, "fsync", slow_fsync)
    monkeypatch.setattr(durable, "temporary_name", named)
    first = threading.Thread(target=atomic_write, args=(target, b"first"))
    second = threading.Thread(target=atomic_write, args=(target, b"second"))
    first.start()
    assert in_fsync.wait(10)
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting: it has not even named its temporary file
    assert len(names) == 1 and not target.exists()
    release.set()
    first.join(10)
    second.join(10)
    assert len(set(names)) == 2
    assert target.read_bytes() == b"second"  # in order, each whole
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_a_lock_file_that_cannot_be_locked_refuses(tmp_path: Path, kind: str) -> None:
    lock = tmp_path / ".lock"
    if kind == "directory":
        lock.mkdir()
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LockUnusable, match="cannot be locked"):
        DirectoryLock(tmp_path).acquire()


def test_a_directory_that_cannot_hold_a_lock_file_is_an_os_error(tmp_path: Path) -> None:
    """No `.lock` can exist (the directory lies under a file): the writes will fail and say
    so; that is not a lock someone else made unusable."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError):
        DirectoryLock(blocker / "state").acquire()


def test_the_lock_is_taken_once(tmp_path: Path) -> None:
    first = DirectoryLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(durable.DirectoryHeld):
            DirectoryLock(tmp_path).acquire()
    finally:
        first.release()
