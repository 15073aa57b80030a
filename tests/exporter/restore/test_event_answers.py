"""Every event in every state has an answer (exporter/restore/answers.py): an accepted event
always changes the state, a refused one changes nothing and does not use up its id."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.restore.answers import ANSWERS, answer, markdown_table
from exporter.restore.keeper import RestoreKeeper
from exporter.restore.model import EVENT_KINDS
from exporter.restore.store import StateStore
from exporter.restore.window import Event, RestoreState, refusal, step
from tests.exporter.restore.restore_helpers import BOUNDS, event, fail, poll, run
from tests.exporter.restore.test_properties import SETTINGS, Restart, actions, advance, bounds_st, start_at

KINDS = st.sampled_from(EVENT_KINDS)


@SETTINGS
@given(start_at, st.lists(st.tuples(actions, KINDS, st.integers(0, 5)), max_size=40), bounds_st)
def test_no_accepted_event_is_a_no_op_and_no_refused_event_uses_its_id(
        t0: float, seq: list, bounds: object) -> None:
    """Random polls, failures, probes and restarts, with an event tried after each: the keeper's
    rule (a known id is a duplicate, else the table decides) holds in every state reached."""
    from tests.exporter.restore.test_properties import inputs_of

    state = RestoreState()
    inputs = inputs_of(t0, [a for a, _, _ in seq])
    for inp, (_, kind, id_n) in zip(inputs, seq, strict=True):
        state = advance(state, inp, bounds)  # type: ignore[arg-type]
        if isinstance(inp, Restart):
            continue
        ev = Event(inp.at, f"probe-{id_n}", kind)
        after = step(state, ev, bounds)  # type: ignore[arg-type]
        if ev.id in state.event_ids:
            continue  # the keeper answers a duplicate before the table (tested below)
        why = refusal(state, kind)
        if why is None:
            assert ev.id in after.event_ids
            assert replace(after, event_ids=state.event_ids) != state, (kind, state)
            state = after
        else:
            assert after == state, (kind, why)
            assert ev.id not in after.event_ids


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_every_event_has_an_answer_in_every_situation(kind: str) -> None:
    situations = [RestoreState(), run([poll(0), event(1, "drain_started")])[-1],
                  run([poll(0), fail(1), fail(20)])[-1],
                  run([poll(0), fail(1), fail(20), event(21, "restore_started")])[-1]]
    for s in situations:
        assert answer(s, kind).event == kind


def test_window_closed_before_drain_started_is_refused_and_keeps_its_id() -> None:
    """The order that stranded a window: a refused window_closed is sent again after the window
    opened, with the same id, and closes it."""
    s = run([poll(0)])[-1]
    closed = event(1, "window_closed", "wc-1")
    assert refusal(s, "window_closed") is not None
    assert step(s, closed, BOUNDS) == s
    s = step(s, event(2, "drain_started", "ds-1"), BOUNDS)
    assert s.window is not None
    s = step(s, replace(closed, at=3), BOUNDS)
    assert s.window is None and "wc-1" in s.event_ids
    assert s.last_window is not None and s.last_window.end == 3


def test_keeper_refuses_no_op_events_without_recording_them(tmp_path: Path) -> None:
    keeper = RestoreKeeper(StateStore(tmp_path), BOUNDS, clock=lambda: 100.0)

    async def go() -> None:
        out = await keeper.apply_event("e1", "window_closed")
        assert out.refused and not out.duplicate
        assert keeper.view().state.event_ids == ()
        assert keeper.view().events[("window_closed", "refused")] == 1
        assert not (tmp_path / "restore-state.json").exists()  # nothing changed, nothing written
        out = await keeper.apply_event("e2", "drain_started")
        assert out.refused is None and out.state.window is not None
        out = await keeper.apply_event("e3", "drain_started")
        assert out.refused is not None and "already open" in out.refused
        out = await keeper.apply_event("e1", "window_closed")  # the same id, now accepted
        assert out.refused is None and not out.duplicate and out.state.window is None
        assert keeper.view().state.event_ids == ("e2", "e1")
        out = await keeper.apply_event("e1", "window_closed")
        assert out.duplicate

    asyncio.run(go())


def test_the_table_has_one_row_per_rule_and_the_docs_show_it() -> None:
    table = markdown_table()
    assert table.count("\n") == len(ANSWERS) + 2
    root = Path(__file__).resolve().parents[3]
    for doc in ("docs/restore.md", "docs/interface.md"):
        assert table in (root / doc).read_text(encoding="utf-8"), doc
