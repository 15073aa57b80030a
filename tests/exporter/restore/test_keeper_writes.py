"""When the keeper writes the state file (two fsyncs each): on changes a later window or a restart
needs, not on every poll of a quiet engine; inside a window, at every poll (evidence)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from exporter.restore.keeper import RestoreKeeper
from exporter.restore.store import StateStore
from exporter.restore.window import restarted
from exporter.snapshot.model import Snapshot
from tests.exporter.restore.restore_helpers import BOUNDS, snap


def observe(keeper: RestoreKeeper, polls: list[tuple[float, Snapshot | None]]) -> None:
    async def go() -> None:
        for at, snapshot in polls:
            await keeper.observe(at, snapshot)

    asyncio.run(go())


def test_a_quiet_engine_is_written_once_not_at_every_poll(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    keeper = RestoreKeeper(store, BOUNDS)
    # In-flight changing at every poll, and failures shorter than the grace: nothing a later
    # window or a restarted sidecar needs. Before: one write (two fsyncs) per poll.
    observe(keeper, [(float(t), snap(inflight=t % 7)) for t in range(0, 100, 5)])
    assert store.writes == 1  # the engine seen for the first time
    observe(keeper, [(100, None), (105, None), (110, snap(inflight=3))])
    assert store.writes == 1
    assert store.load() == restarted(keeper.view().state)  # the file is the durable state


def test_what_a_later_window_needs_is_written(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    keeper = RestoreKeeper(store, BOUNDS)
    observe(keeper, [(0, snap()), (5, snap()), (10, snap(generation="g2"))])
    assert store.writes == 2  # a new incarnation: the unplanned restart and the engine seen
    loaded = store.load()
    assert loaded is not None and loaded.last_seen is not None
    assert loaded.last_seen.generation == "g2" and loaded.unplanned_restarts == 1


def test_inside_a_window_every_poll_is_written(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    keeper = RestoreKeeper(store, BOUNDS)
    observe(keeper, [(0, snap()), (5, snap(admission="draining", inflight=2))])
    assert store.writes == 2
    observe(keeper, [(10 + t, snap(admission="draining", inflight=2)) for t in range(5)])
    assert store.writes == 7  # the last observation that saw the restore incomplete: evidence
    saved = store.load()
    assert saved is not None and saved.window is not None
    assert saved.window.last_unrestored == 14


def test_a_failed_write_is_retried_at_the_next_poll_without_a_durable_change(
        tmp_path: Path) -> None:
    blocker = tmp_path / "mount"
    blocker.write_text("not a directory yet")
    store = StateStore(blocker / "state")
    keeper = RestoreKeeper(store, BOUNDS)
    observe(keeper, [(0, snap())])
    assert store.writes == 0 and keeper.view().write_errors == 1
    blocker.unlink()
    blocker.mkdir()  # the volume comes back
    observe(keeper, [(5, snap(inflight=4))])  # only the in-flight count changed
    assert store.writes == 1 and store.load() == restarted(keeper.view().state)
