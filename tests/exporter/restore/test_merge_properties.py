"""Property: a state file unreadable for a while, then merged with what a fresh process saw
meanwhile (exporter/restore/merge.py), loses nothing of section 6.7: the open window's start is
never moved later and keeps its incumbent, no event id is lost, the checks are those of the
later judged window, and the result is a state file like any other."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from exporter.restore import store
from exporter.restore.merge import merge
from exporter.restore.window import Bounds, RestoreState, restarted
from tests.exporter.restore.test_properties import (
    SETTINGS,
    Restart,
    actions,
    advance,
    bounds_st,
    inputs_of,
    start_at,
)


def run(seq: list, bounds: Bounds, state: RestoreState) -> RestoreState:
    for inp in seq:
        state = advance(state, inp, bounds)
    return state


@SETTINGS
@given(start_at, st.lists(actions, max_size=30), st.lists(actions, max_size=30), bounds_st)
def test_merge_after_an_unreadable_file_loses_nothing(t0: float, before: list, during: list,
                                                      bounds: Bounds) -> None:
    inputs = inputs_of(t0, before + during)
    saved = restarted(run(inputs[:len(before)], bounds, RestoreState()))  # the file, held
    # A fresh process that could not read it (its restarts: still unreadable, memory kept).
    mem = run([i for i in inputs[len(before):] if not isinstance(i, Restart)], bounds,
              RestoreState())
    merged = merge(saved, mem)
    assert store.decode(store.encode(merged)) == restarted(merged)  # an ordinary state
    ids = set(merged.event_ids)
    assert set(saved.event_ids) <= ids and set(mem.event_ids) <= ids
    closed = mem.last_window  # this process closed a window: the file's is over
    if saved.window is not None and closed is not None:
        assert merged.window == mem.window  # this process's windows stand
        assert merged.last_window is not None and merged.last_window.end == closed.end
        if not closed.start_exact:  # the file's outage seen late: with the start on file
            assert merged.last_window.start == saved.window.start
    elif saved.window is not None:
        assert merged.window is not None and merged.window.start <= saved.window.start
        if saved.window.incumbent:  # an incumbent on file is never lost
            assert merged.window.incumbent is not None
        file_first = mem.window is None or merged.window.start < mem.window.start or (
            merged.window.start == saved.window.start
            and saved.window.start_exact >= mem.window.start_exact)
        if file_first and saved.window.incumbent:  # the file's window, with its incumbent
            assert merged.window.incumbent == saved.window.incumbent
        elif mem.window is not None and merged.window.start == mem.window.start:
            # This process's window (earlier, or exact where the file's was not at the same
            # time) keeps its incumbent; the file's fills it in when it had none.
            assert merged.window.incumbent == (mem.window.incumbent or saved.window.incumbent)
    later = max((s for s in (saved, mem) if s.judged is not None),
                key=lambda s: s.judged.end if s.judged else 0.0, default=None)
    if later is not None:
        assert merged.checks == later.checks
    assert merged.unplanned_restarts == saved.unplanned_restarts + mem.unplanned_restarts
