"""The keeper under faults around it: a state file unreadable then readable (merged, never
written over), a wall clock that steps, an engine that answers without a valid snapshot, a
slow disk and a slow preflight probe (neither stalls the event loop or the poll)."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from pathlib import Path

from exporter.labels import ErrorReason
from exporter.restore.keeper import RestoreKeeper
from exporter.restore.merge import merge
from exporter.restore.store import StateStore
from exporter.restore.window import Poll, RestoreState, restarted, step
from tests.exporter.restore.restore_helpers import BOUNDS, PREFLIGHT_BOUNDS, event, fail, final, poll, snap


def saved_window() -> RestoreState:
    """On file: a window opened by a drain at 10 (exact), restore started, ids e1 e2, and the
    checks of an earlier judged window (a failed container check)."""
    first = final([poll(0, container="c0"), poll(1, admission="draining", inflight=0,
                                                   container="c0"),
                   fail(2), fail(20), poll(30, generation="g0", container="c9")])
    assert first.checks["container"] is False
    return restarted(final([poll(40, generation="g0", container="c9", inflight=3),
                            event(41, "drain_started", "e1"),
                            poll(42, generation="g0", container="c9", admission="draining",
                                 inflight=1),
                            event(43, "restore_started", "e2")], state=first))


def test_unreadable_then_readable_is_merged_never_written_over(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    saved = saved_window()
    store.save(saved)
    # Unreadable at start (root reads any mode): the file moved away and a FIFO in its place.
    fifo = tmp_path / "restore-state.json"
    held = tmp_path / "held.json"
    fifo.rename(held)
    os.mkfifo(fifo)
    keeper = RestoreKeeper(store, BOUNDS)

    async def go() -> None:
        keeper.load()
        assert keeper.view().read_errors == 1 and "FIFO" in keeper.view().last_read_error
        # Meanwhile the engine fails past the grace: this process opens its own, later window.
        for at in (100.0, 105.0, 120.0):
            await keeper.observe(at, None, ErrorReason.CONNECT)
        # Held: the event is not applied (503), judged against no window it cannot see.
        out = await keeper.apply_event("e3", "restore_started")
        assert out.unavailable is not None and "cannot be read" in out.unavailable
        assert keeper.view().state_unknown and keeper.view().state.event_ids == ()
        assert fifo.exists() and not fifo.is_file()  # held: never written over
        fifo.unlink()
        held.rename(fifo)  # the file is back
        await keeper.observe(125.0, None, ErrorReason.CONNECT)
        assert not keeper.view().state_unknown
        # The retry applies now, to the merged window (it was marked on file already: refused).
        again = await keeper.apply_event("e3", "restore_started")
        assert again.unavailable is None and again.refused is not None

    asyncio.run(go())
    state = keeper.view().state
    assert saved.window is not None and state.window is not None
    assert state.window.start == saved.window.start == 41  # the earliest exact start
    assert state.window.start_exact and state.window.incumbent == saved.window.incumbent
    assert state.event_ids == ("e1", "e2")
    assert state.checks == saved.checks and state.judged == saved.judged
    assert state.last_window == saved.last_window
    on_disk = store.load()
    assert on_disk is not None and on_disk == restarted(state)


def test_merge_keeps_the_close_this_process_saw_with_the_start_on_file() -> None:
    saved = saved_window()
    assert saved.window is not None
    # A fresh process, file unreadable: the engine down past the grace, then restored.
    mem = final([fail(100), fail(120), poll(130, generation="g5", container="c9")])
    assert mem.window is None and mem.last_window is not None
    merged = merge(saved, mem)
    assert merged.window is None
    assert merged.last_window is not None and merged.last_window.start == saved.window.start
    assert merged.last_window.end == 130


def test_a_step_back_of_the_wall_clock_does_not_delay_the_window() -> None:
    """Failures 1 s apart on the monotonic clock while the wall clock steps back an hour: the
    window opens once the grace (10 s) has passed on the monotonic clock, at the first failed
    poll's wall time."""
    s = step(RestoreState(), poll(1000), BOUNDS)
    wall = [1001.0, 1002.0, *[1003.0 - 3600 + i for i in range(12)]]
    for i, at in enumerate(wall):
        s = step(s, Poll(at, None, mono=50.0 + i), BOUNDS)
    assert s.window is not None and s.window.start == 1001.0


def test_an_engine_that_answers_with_an_invalid_snapshot_is_not_an_outage(tmp_path: Path) -> None:
    keeper = RestoreKeeper(StateStore(tmp_path), BOUNDS)

    async def go() -> None:
        await keeper.observe(0, snap())
        for at in range(1, 60, 5):
            await keeper.observe(float(at), None, ErrorReason.SCHEMA)
        assert keeper.view().state.window is None
        for at in (61.0, 72.0):  # refused past the grace: that is an outage
            await keeper.observe(at, None, ErrorReason.CONNECT)

    asyncio.run(go())
    window = keeper.view().state.window
    assert window is not None and window.start == 61 and window.cause == "unreachable"


def test_a_slow_disk_never_stalls_the_event_loop(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    real = store.save
    entered = threading.Event()

    def slow_save(state: RestoreState) -> None:
        entered.set()
        time.sleep(1.0)  # two fsyncs of a stalled disk
        real(state)

    store.save = slow_save  # type: ignore[method-assign]
    keeper = RestoreKeeper(store, BOUNDS)
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def go() -> None:
        tick = asyncio.create_task(ticker())
        await keeper.observe(0, snap())  # the first engine seen: written
        tick.cancel()

    asyncio.run(go())
    assert entered.is_set() and store.load() is not None
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) > 20 and max(gaps) < 0.5, max(gaps)


def test_a_slow_probe_never_holds_up_the_poll_cycle(tmp_path: Path) -> None:
    """A cycle that waited for the probes would take their deadline; the deadline is set far
    above what the same cycles take with quick probes on this machine now (the yardstick)."""
    async def slow() -> tuple[bool, str]:
        await asyncio.sleep(30)
        return True, "ok"

    async def quick() -> tuple[bool, str]:
        return True, "ok"

    steps = ((0.0, snap()), (1.0, snap(admission="draining")), (2.0, None), (20.0, None),
             (30.0, snap(generation="g2")), (31.0, snap(generation="g2")))

    async def go(keeper: RestoreKeeper) -> list[float]:
        took = []
        for at, s in steps:
            t0 = time.monotonic()
            await keeper.observe(at, s, None if s else ErrorReason.CONNECT)
            took.append(time.monotonic() - t0)
        assert keeper.view().state.phase == "verifying"
        await keeper.settle()
        return took

    (tmp_path / "quick").mkdir()
    yardstick = max(asyncio.run(go(RestoreKeeper(
        StateStore(tmp_path / "quick"), PREFLIGHT_BOUNDS, {"direct": quick, "routed": quick},
        preflight_deadline=5.0))))
    deadline = max(0.3, 20 * yardstick)
    keeper = RestoreKeeper(StateStore(tmp_path), PREFLIGHT_BOUNDS,
                           {"direct": slow, "routed": quick}, preflight_deadline=deadline)
    took = asyncio.run(go(keeper))
    assert max(took) < deadline, (took, yardstick)
    window = keeper.view().state.window
    assert window is not None and window.preflight == {"direct": False, "routed": True}
