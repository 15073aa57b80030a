"""The durable restore state file: round trip, atomic replacement, write errors, what else may
be at its path (a damaged file: test_store_corrupt.py)."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from exporter import durable
from exporter.cycle.loop import PollLoop
from exporter.restore import store
from exporter.restore.store import STATE_FILE, StateFileError, StateStore
from exporter.restore.window import RestoreState, restarted
from tests.exporter.restore.restore_helpers import (
    MockEngine,
    closed_window_state,
    make_sidecar,
    open_window_state,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("state", [RestoreState(), open_window_state(), closed_window_state()],
                         ids=["initial", "open", "closed"])
def test_save_load_round_trip(tmp_path: Path, state: RestoreState) -> None:
    s = StateStore(tmp_path / "state")
    assert s.load() is None
    s.save(state)
    # What one process watched does not carry over; everything else does, exactly.
    assert s.load() == restarted(state)
    # saving again replaces, never appends
    s.save(RestoreState())
    assert s.load() == RestoreState()
    assert sorted(p.name for p in s.directory.iterdir()) == [STATE_FILE]  # no tmp left behind


def test_open_window_fields_survive(tmp_path: Path) -> None:
    state = open_window_state()
    s = StateStore(tmp_path)
    s.save(state)
    back = s.load()
    assert back is not None and back.window is not None and state.window is not None
    assert back.window.start == 1764389525.987654321
    assert back.window.cause == "drain"
    assert back.window.incumbent == state.window.incumbent
    assert back.window.last_inflight == 2
    assert back.event_ids == ("ev-1",)


def test_stray_tmp_file_from_a_crash_is_ignored(tmp_path: Path) -> None:
    s = StateStore(tmp_path)
    old = open_window_state()
    s.save(old)
    # A crash between the tmp write and the rename leaves a tmp file (here: a torn one).
    (tmp_path / f".{STATE_FILE}.4242.tmp").write_bytes(store.encode(RestoreState())[:20])
    assert s.load() == restarted(old)
    s.save(closed_window_state())
    assert s.load() == restarted(closed_window_state())


@pytest.mark.e2e
def test_killed_between_fsync_and_rename_keeps_the_old_state(tmp_path: Path) -> None:
    """A real process dies (os._exit) at the rename: the old file is intact, the new one whole."""
    s = StateStore(tmp_path)
    old = open_window_state()
    s.save(old)
    code = textwrap.dedent(f"""
        import os, pathlib, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from restore_helpers import fail, final, poll
        from exporter.restore.store import StateStore
        pathlib.Path.replace = lambda self, target: os._exit(137)
        StateStore(pathlib.Path({str(tmp_path)!r})).save(final([poll(0), poll(1, admission="closed")]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 137, proc.stderr.decode()
    stray = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(stray) == 1
    assert store.decode(stray[0].read_bytes()).window is not None  # fully written before the kill
    assert s.load() == restarted(old)
    # The next start drops the dead writer's temporary file.
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def _unwritable_dirs(tmp_path: Path) -> list[Path]:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    dirs = [a_file / "state", a_file]  # parent is a regular file; the state dir is a file
    if os.geteuid() != 0:  # chmod does not stop root
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        dirs.append(ro)
    return dirs


def test_unwritable_state_dir_counts_write_errors_and_never_raises(tmp_path: Path) -> None:
    for state_dir in _unwritable_dirs(tmp_path):
        sidecar = make_sidecar(state_dir)
        loop = sidecar.loop

        async def go(sidecar: Any, loop: PollLoop) -> None:
            await loop.cycle()  # first snapshot: state changes, persist fails
            out = await loop.keeper.apply_event("ev-1", "drain_started")
            assert out.unavailable is not None  # not on disk: rolled back, answered 503
            await sidecar.client.aclose()

        with capture_logs() as logs:
            asyncio.run(go(sidecar, loop))
        loop.close()
        assert loop.view.restore.write_errors == 2, state_dir
        assert loop.view.restore.last_write_error.split(":")[0] in (
            "NotADirectoryError", "FileExistsError", "PermissionError")
        # Nothing acknowledged: no window opened by the event, its id unused.
        assert loop.view.restore.state.window is None
        assert loop.view.restore.state.event_ids == ()
        failed = [e for e in logs if e["event"] == "restore_state_write_failed"]
        assert len(failed) == 2 and failed[0]["log_level"] == "error"
        assert sidecar.registry.get_sample_value("helios_restore_state_write_errors_total") == 2
        assert sidecar.status()["restore"]["state_write_errors"] == 2


def _disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC without root mounts: writes to a temporary state file fail as on a full disk
    (every other descriptor, asyncio's own included, writes as usual)."""
    real = os.write

    def write(fd: int, data: Any) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


def test_disk_full_keeps_the_old_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = StateStore(tmp_path)
    old = open_window_state()
    s.save(old)
    _disk_full(monkeypatch)
    with pytest.raises(OSError) as info:
        s.save(RestoreState())
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # cleaned up
    assert s.load() == restarted(old)


def test_a_planted_link_at_the_temporary_name_is_never_written_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("theirs")
    tmp = tmp_path / f".{STATE_FILE}.planted.tmp"
    tmp.symlink_to(target)
    monkeypatch.setattr(durable, "temporary_name", lambda _path: tmp)  # the name it would use
    s = StateStore(tmp_path)
    s.save(open_window_state())
    assert target.read_text() == "theirs"  # the link was replaced, not followed
    assert not tmp.exists() and not tmp.is_symlink()
    assert s.load() == restarted(open_window_state())


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_anything_but_a_regular_file_is_held_never_read_nor_written_over(
        tmp_path: Path, kind: str) -> None:
    s = StateStore(tmp_path)
    target = tmp_path / "target.json"
    target.write_bytes(store.encode(open_window_state()))
    if kind == "fifo":
        os.mkfifo(s.path)  # opened without O_NONBLOCK, the read would hang here
    elif kind == "symlink":
        s.path.symlink_to(target)
    else:
        s.path.mkdir()
    with pytest.raises(StateFileError) as info:
        s.load()
    assert info.value.unreadable and info.value.moved_to is None
    assert {"fifo": "a FIFO", "symlink": "symbolic link", "directory": "a directory"}[kind] \
        in str(info.value)
    assert s.path.exists() or s.path.is_symlink()


def test_disk_full_is_counted_by_the_keeper(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    sidecar = make_sidecar(tmp_path)
    loop = sidecar.loop
    _disk_full(monkeypatch)

    async def go() -> None:
        await loop.cycle()
        await sidecar.client.aclose()

    with capture_logs() as logs:
        asyncio.run(go())
    loop.close()
    assert loop.view.restore.write_errors == 1
    assert "No space left" in loop.view.restore.last_write_error
    assert any(e["event"] == "restore_state_write_failed" for e in logs)
    assert not (tmp_path / STATE_FILE).exists()


def test_state_survives_a_sidecar_restart(tmp_path: Path) -> None:
    engine = MockEngine()
    first = make_sidecar(tmp_path, engine)

    async def go(sidecar: object, steps: list) -> None:
        p = sidecar.loop  # type: ignore[attr-defined]
        for s in steps:
            await s(p)
        await sidecar.client.aclose()  # type: ignore[attr-defined]
        p.close()

    async def cycle(p: object) -> None:
        await p.cycle()  # type: ignore[attr-defined]

    async def drain(p: object) -> None:
        engine.snapshot = {**engine.snapshot, "admission": {"state": "draining",
                                                            "inflight_requests": 1}}
        await p.cycle()  # type: ignore[attr-defined]

    asyncio.run(go(first, [cycle, drain]))
    window = first.loop.view.restore.state.window
    assert window is not None
    second = make_sidecar(tmp_path, engine)
    second.loop.load_state()
    engine.down = True
    asyncio.run(go(second, [cycle]))
    again = second.loop.view.restore.state.window
    assert again is not None
    assert again.start == window.start and again.incumbent == window.incumbent
    assert second.registry.get_sample_value(
        "helios_restore_window_start_timestamp_seconds") == window.start


def test_failed_write_is_retried_every_cycle_until_it_lands(tmp_path: Path) -> None:
    blocker = tmp_path / "mount"
    blocker.write_text("not a directory yet")
    state_dir = blocker / "state"
    sidecar = make_sidecar(state_dir)
    loop = sidecar.loop

    async def go() -> None:
        await loop.cycle()
        failed = await loop.keeper.apply_event("ev-1", "drain_started")
        assert failed.unavailable is not None and loop.view.restore.state.window is None
        blocker.unlink()
        blocker.mkdir()  # the volume comes back
        await loop.cycle()  # the poll's own change (the engine seen) is written now
        assert StateStore(state_dir).load() is not None
        # The retry, same id: applied now, not a duplicate.
        again = await loop.keeper.apply_event("ev-1", "drain_started")
        assert again.unavailable is None and not again.duplicate
        await sidecar.client.aclose()

    asyncio.run(go())
    loop.close()
    saved = StateStore(state_dir).load()
    assert saved is not None and saved.window is not None
    assert saved.window.start == loop.view.restore.state.window.start  # type: ignore[union-attr]


def test_unreadable_state_file_is_never_overwritten(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    StateStore(state_dir).save(open_window_state())
    good = (state_dir / STATE_FILE).read_bytes()
    (state_dir / STATE_FILE).rename(tmp_path / "held")
    (state_dir / STATE_FILE).mkdir()  # reading it fails with EISDIR: unreadable, not corrupt
    sidecar = make_sidecar(state_dir)
    loop = sidecar.loop
    loop.load_state()
    assert loop.view.restore.read_errors == 1 and loop.view.restore.corrupt_files == 0

    async def go() -> None:
        await loop.cycle()
        assert (state_dir / STATE_FILE).is_dir()  # nothing written over it
        (state_dir / STATE_FILE).rmdir()
        (state_dir / STATE_FILE).write_bytes(good)  # readable again
        await loop.cycle()
        await sidecar.client.aclose()

    asyncio.run(go())
    loop.close()
    # The recovered window was adopted (then closed by the serving engine): not lost.
    start = open_window_state().window.start  # type: ignore[union-attr]
    state = loop.view.restore.state
    recovered = state.window.start if state.window else state.last_window.start  # type: ignore[union-attr]
    assert recovered == start
