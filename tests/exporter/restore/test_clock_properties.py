"""The restore window on the monotonic clock: a step of the wall clock while one process watches
a window changes nothing it observes, and no window ever ends before it started."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from exporter.restore.window import Bounds, Input, LastWindow, RestoreState, step
from tests.exporter.restore.restore_helpers import event, final, poll
from tests.exporter.restore.test_properties import SETTINGS, Restart, actions, bounds_st, inputs_of

STEPS = st.sampled_from([4300.0, -3600.0, 86400.0, -86400.0, 0.5, -0.5])


def timed(inputs: list[Input | Restart], step_at: int, offset: float) -> list[Input]:
    """`inputs` with their monotonic time set to the wall time they had, and from `step_at` on
    a wall clock stepped by `offset` (the monotonic clock does not step)."""
    out: list[Input] = []
    for i, inp in enumerate(inputs):
        if isinstance(inp, Restart):
            continue  # one process watches: no restart
        shift = offset if i >= step_at else 0.0
        out.append(replace(inp, at=inp.at + shift, mono=inp.at))
    return out


def closes(inputs: list[Input], bounds: Bounds) -> list[tuple[RestoreState, LastWindow]]:
    """Every state after an input that recorded a new last window, with that window."""
    state, out = RestoreState(), []
    for inp in inputs:
        after = step(state, inp, bounds)
        if after.last_window is not None and after.last_window is not state.last_window:
            out.append((after, after.last_window))
        state = after
    return out


def open_before(inputs: list[Input], k: int, bounds: Bounds) -> float | None:
    state = RestoreState()
    for inp in inputs[:k]:
        state = step(state, inp, bounds)
    return None if state.window is None else state.window.start


@SETTINGS
@given(st.floats(1.7e9, 1.8e9, allow_nan=False), st.lists(actions, min_size=2, max_size=40),
       bounds_st, st.integers(1, 39), STEPS)
def test_a_wall_clock_step_changes_nothing_of_a_window_this_process_watches(
        t0: float, seq: list, bounds: Bounds, k: int, offset: float) -> None:
    base = inputs_of(t0, seq)
    k = min(k, len(base) - 1)
    plain, stepped = timed(base, len(base), 0.0), timed(base, k, offset)
    start = open_before(plain, k, bounds)
    if start is None or k >= len(plain):
        return
    ours = [(s, lw) for s, lw in closes(plain, bounds) if lw.start == start]
    theirs = [(s, lw) for s, lw in closes(stepped, bounds) if lw.start == start]
    assert bool(ours) == bool(theirs)
    if not ours:
        return
    (s1, a), (s2, b) = ours[0], theirs[0]
    assert a.outcome == b.outcome and a.lost == b.lost and a.cause == b.cause
    assert a.start is not None and b.start is not None
    assert math.isclose(a.end - a.start, b.end - b.start, abs_tol=1e-6)
    assert s1.checks == s2.checks


@SETTINGS
@given(st.floats(1.7e9, 1.8e9, allow_nan=False), st.lists(actions, max_size=40), bounds_st,
       st.lists(STEPS, min_size=40, max_size=40))
def test_no_window_ends_before_it_started(t0: float, seq: list, bounds: Bounds,
                                          jumps: list[float]) -> None:
    """Whatever the wall clock does between inputs (it may step at each), every recorded window
    ends at or after its start."""
    inputs, wall = [], 0.0
    for i, inp in enumerate(x for x in inputs_of(t0, seq) if not isinstance(x, Restart)):
        wall += jumps[i]
        inputs.append(replace(inp, at=inp.at + wall, mono=inp.at))
    for _, last in closes(inputs, bounds):
        assert last.start is None or last.end >= last.start, last


def test_the_issue_s_ten_second_window_with_a_step_of_4300_s() -> None:
    """Drain at 0 with 3 in flight; the wall clock steps +4300 s (past the request cutoff of
    4200 s); the incumbent drains to 0 and another generation admits at 10 s: in time, nothing
    lost, drained_admission passed, 10 s long."""
    bounds = Bounds(4200.0, 5400.0, 60.0)
    t = 1.8e9

    def at(mono: float, wall_step: float) -> dict[str, float]:
        return {"at": t + mono + wall_step, "mono": t + mono}

    inputs: list[Input] = [
        replace(poll(t, inflight=3), **at(0, 0)),
        replace(event(t, "drain_started", "d-1"), **at(0.1, 0)),
        replace(poll(t, admission="draining", inflight=3), **at(1, 0)),
        replace(poll(t, admission="draining", inflight=3), **at(2, 4300)),
        replace(poll(t, admission="draining", inflight=0), **at(5, 4300)),
        replace(poll(t, generation="g2", container="c2"), **at(10.1, 4300)),
    ]
    state = final(inputs, bounds)
    last = state.last_window
    assert last is not None and last.start is not None
    assert last.outcome == "in_time" and last.lost == 0
    assert state.checks["drained_admission"] is True
    assert math.isclose(last.end - last.start, 10.0)
