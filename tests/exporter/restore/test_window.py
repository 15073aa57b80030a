"""The transitions of the restore window (docs/interface.md section 6) with plain timestamps:
opening, deadlines, the drain_started guard, phases, a closed window that stays closed (how it
closes and what it judges: test_window_close.py).

Bounds used throughout: request cutoff 100 s, restore bound 200 s, down grace 10 s.
"""

from __future__ import annotations

import pytest

from exporter.restore.window import (
    MAX_EVENT_IDS,
    Bounds,
    Engine,
    Poll,
    RestoreState,
    Window,
    compute_checks,
    refusal,
    step,
)
from tests.exporter.restore.restore_helpers import (
    BOUNDS,
    PREFLIGHT_BOUNDS,
    event,
    fail,
    final,
    poll,
    restart,
    run,
    snap,
)


def serving(at: float = 0.0, **kw: object) -> RestoreState:
    """A state that has seen engine g1 (image sha256:aaa, container c1) serving."""
    return final([poll(at, **kw)])  # type: ignore[arg-type]


# -- opening -------------------------------------------------------------------------------------

@pytest.mark.parametrize("admission", ["draining", "closed"])
def test_opens_on_snapshot_not_open_start_is_that_poll(admission: str) -> None:
    s = final([poll(0, inflight=3), poll(5, inflight=4), poll(12, admission=admission, inflight=2)])
    assert s.window is not None
    assert s.window.start == 12
    assert s.window.cause == "drain"
    assert s.window.incumbent == Engine("g1", "sha256:aaa", "c1")
    assert s.window.last_inflight == 2
    assert s.phase == "draining"


def test_open_engine_keeps_serving_without_window() -> None:
    states = run([poll(t, inflight=t) for t in range(0, 50, 5)])
    assert all(s.window is None and s.phase == "serving" for s in states)
    assert states[-1].last_seen == Engine("g1", "sha256:aaa", "c1")


def test_opens_on_first_ever_snapshot_draining() -> None:
    s = final([poll(7, generation="g9", admission="closed", inflight=0)])
    assert s.window is not None and s.window.start == 7
    assert s.window.incumbent is not None and s.window.incumbent.generation == "g9"
    assert s.phase == "drained"


def test_opens_on_drain_started_event() -> None:
    s = step(serving(0, inflight=2), event(33.25, "drain_started"), BOUNDS)
    assert s.window is not None
    assert s.window.start == 33.25
    assert s.window.cause == "event"
    assert s.window.incumbent == Engine("g1", "sha256:aaa", "c1")
    assert s.window.last_inflight == 2
    assert s.phase == "draining"


def test_restore_started_without_window_opens_nothing() -> None:
    # docs/interface.md section 6 lists what opens a window; restore_started is not among them.
    # It is refused (exporter/restore/answers.py): nothing changes, its id is not recorded.
    before = serving()
    assert refusal(before, "restore_started") is not None
    assert step(before, event(40, "restore_started", "r1"), BOUNDS) == before


def test_drain_counts_only_before_the_engine_went_away() -> None:
    # Draining with requests in flight, then unreachable past the grace, then another
    # incarnation (restarted, same generation) with nothing in flight: the incumbent's requests
    # were not drained, they were lost.
    s = step(serving(started_at=1), poll(10, admission="draining", inflight=2, started_at=1),
             BOUNDS)
    s = final([fail(20), fail(31), poll(35, admission="closed", inflight=0, started_at=33)],
              state=s)
    assert s.window is not None and not s.window.drained and s.window.lost == 2
    s = step(s, poll(40, admission="open", inflight=0, generation="g-new"), BOUNDS)
    assert s.checks["drained_admission"] is False


def test_snapshot_without_admission_neither_opens_nor_closes() -> None:
    no_admission = snap(admission=None)
    s = step(serving(), Poll(10, no_admission), BOUNDS)
    assert s.window is None
    s = step(serving(), poll(10, admission="draining", inflight=1), BOUNDS)
    s = step(s, Poll(20, no_admission), BOUNDS)
    assert s.window is not None and s.window.start == 10


@pytest.mark.parametrize("kind", ["window_closed", "abort"])
def test_close_and_abort_without_window_open_nothing(kind: str) -> None:
    # Refused: they would change nothing, so the id is not used up (a window_closed sent too
    # early closes the window when sent again after drain_started).
    before = serving()
    assert refusal(before, kind) is not None
    assert step(before, event(5, kind, "x1"), BOUNDS) == before


def test_unreachable_within_grace_opens_nothing_then_start_is_first_failed_poll() -> None:
    # grace 10: failures at 5, 10, 15 span exactly 10 s (not longer): no window yet.
    states = run([poll(0), fail(5), fail(10), fail(15), fail(15.5)])
    assert [s.window is None for s in states] == [True, True, True, True, False]
    assert states[3].unreachable_since == 5
    w = states[-1].window
    assert w is not None
    assert w.start == 5  # the FIRST failed poll, not when the grace ran out
    assert w.cause == "unreachable"
    assert w.incumbent == Engine("g1", "sha256:aaa", "c1")
    assert states[-1].phase == "down"


def test_success_within_grace_resets_the_failure_streak() -> None:
    states = run([poll(0), fail(5), fail(14), poll(15), fail(20), fail(30), fail(30.5)])
    assert all(s.window is None for s in states[:-1])
    w = states[-1].window
    assert w is not None and w.start == 20


def test_zero_grace_opens_on_the_second_failure_at_the_first() -> None:
    b = Bounds(100, 200, 0)
    s = final([poll(0), fail(5), fail(5.001)], b)
    assert s.window is not None and s.window.start == 5


# -- deadlines and a start that never moves ------------------------------------------------------

@pytest.mark.parametrize(
    ("inputs", "start"),
    [
        ([poll(0), poll(50, admission="draining", inflight=1)], 50),
        ([poll(0), event(61.5, "drain_started")], 61.5),
        ([poll(0), fail(70), fail(75), fail(81)], 70),
    ],
)
def test_deadlines_are_start_plus_bounds(inputs: list, start: float) -> None:
    for bounds in (BOUNDS, Bounds(4200, 5400, 60), Bounds(0.5, 0.75, 0.1)):
        s = final(inputs, bounds) if bounds is not BOUNDS else final(inputs)
        if s.window is None:  # the tiny-grace bound opens on failures sooner; same first failure
            continue
        assert s.window.start == start
        assert s.window.deadline(bounds, "request_cutoff") == start + bounds.request_cutoff
        assert s.window.deadline(bounds, "restore") == start + bounds.restore_bound


def test_start_never_moves_while_open() -> None:
    inputs = [
        poll(0, inflight=5),
        poll(10, admission="draining", inflight=5),  # opens at 10
        poll(20, admission="draining", inflight=3),
        event(25, "drain_started"),
        event(26, "drain_started"),
        poll(30, admission="closed", inflight=0),
        poll(35, admission="open", inflight=0, generation="g1"),  # seen not open: this closes
    ]
    states = run(inputs)
    assert [s.window.start for s in states[1:-1] if s.window] == [10] * 5
    # reopen by failures and keep hammering it
    inputs2 = [fail(40 + i) for i in range(30)] + [
        event(80, "restore_started"), event(81, "drain_started"),
        poll(82, generation="g2", admission="closed", inflight=0),
        fail(83), fail(200), poll(201, generation="g2", admission="draining", inflight=0),
    ]
    states2 = run(inputs2, state=states[-1])
    opened = [s for s in states2 if s.window is not None]
    assert opened and {s.window.start for s in opened} == {40}  # type: ignore[union-attr]


def test_event_opened_window_keeps_its_start_when_the_engine_drains_later() -> None:
    s = final([poll(0), event(5, "drain_started"), poll(10, admission="draining", inflight=2),
               fail(20), fail(40)])
    assert s.window is not None and s.window.start == 5 and s.window.cause == "event"


def test_unreachable_window_keeps_first_failure_as_start_when_draining_seen() -> None:
    s = final([poll(0), fail(3), fail(20), poll(25, admission="draining", inflight=1)])
    assert s.window is not None and s.window.start == 3 and s.window.cause == "unreachable"


# -- the drain_started guard ---------------------------------------------------------------------

def test_event_window_not_closed_by_engine_still_reporting_open() -> None:
    states = run([poll(0), event(5, "drain_started"), poll(10, inflight=4), poll(20, inflight=0),
                  poll(30, inflight=0)])
    for s in states[1:]:
        assert s.window is not None and s.window.start == 5
        assert s.phase == "draining"


@pytest.mark.parametrize(
    "gone_away",
    [
        [poll(40, admission="draining", inflight=1)],
        [poll(40, admission="closed", inflight=0)],
        [fail(40), fail(51)],  # unreachable for longer than the grace
    ],
)
def test_event_window_closes_once_engine_was_seen_going_away(gone_away: list) -> None:
    states = run([poll(0), event(5, "drain_started"), poll(10), *gone_away, poll(60)])
    assert states[-2].window is not None
    assert states[-1].window is None
    assert states[-1].last_window is not None and states[-1].last_window.end == 60


def test_event_window_is_not_closed_by_a_blip() -> None:
    # One failed poll is not the engine going away: an engine still admitting after it keeps the
    # window of the drain_started event open.
    states = run([poll(0), event(5, "drain_started"), poll(10), fail(40), poll(45), poll(50)])
    assert all(s.window is not None and s.window.start == 5 for s in states[1:])
    assert states[-1].phase == "draining"


# -- phases --------------------------------------------------------------------------------------

def test_phases() -> None:
    states = run([
        poll(0, inflight=2),
        poll(10, admission="draining", inflight=2),
        poll(15, admission="closed", inflight=0),
        fail(20),
        event(25, "restore_started"),
        fail(26),
        poll(30, generation="g2", admission="closed", inflight=0),
        poll(35, generation="g2"),
    ], PREFLIGHT_BOUNDS)
    assert [s.phase for s in states] == [
        "serving", "draining", "drained", "down", "restoring", "restoring", "restoring", "verifying"]


def test_down_without_restore_started() -> None:
    assert final([poll(0), fail(1), fail(20)]).phase == "down"


# -- a closed window stays closed without a new cause --------------------------------------------

def test_abort_while_unreachable_opens_no_new_window_for_that_outage() -> None:
    # The engine will not come back: before, the failures after the abort opened a new window a
    # grace later, with a later start (the clock restarted) and pages at its deadlines.
    states = run([poll(0), fail(5), fail(16), event(20, "abort"), fail(25), fail(30), fail(300)])
    assert states[2].window is not None and states[2].window.start == 5
    assert states[3].window is None and states[3].outage_aborted
    assert all(s.window is None and s.outage_aborted for s in states[4:])
    assert states[3].last_window is not None and states[3].last_window.outcome == "aborted"


def test_after_an_aborted_outage_the_engine_answering_rearms_the_window() -> None:
    s = final([poll(0), fail(5), fail(16), event(20, "abort"), fail(25),
               poll(40, generation="g2")])
    assert s.window is None and not s.outage_aborted
    assert s.unplanned_restarts == 1  # it came back outside any window
    s = final([fail(50), fail(61)], state=s)
    assert s.window is not None and s.window.start == 50  # the next outage opens one


def test_drain_started_after_an_aborted_outage_opens_a_window() -> None:
    s = final([poll(0), fail(5), fail(16), event(20, "abort"), fail(25),
               event(30, "drain_started")])
    assert s.window is not None and s.window.start == 30 and s.phase == "down"
    assert not s.outage_aborted


def test_an_aborted_outage_stays_aborted_across_a_sidecar_restart() -> None:
    s = restart(final([poll(0), fail(5), fail(16), event(20, "abort")]))
    assert s.outage_aborted
    s = final([fail(100), fail(200)], state=s)
    assert s.window is None


def test_abort_while_the_engine_answers_leaves_later_outages_alone() -> None:
    s = final([poll(0), poll(5, admission="draining", inflight=0), event(8, "abort")])
    assert s.window is None and not s.outage_aborted
    s = final([fail(10), fail(21)], state=s)
    assert s.window is not None and s.window.start == 10


def test_window_closed_while_unreachable_never_restarts_the_clock() -> None:
    # The issue: 200, window closed, a new window seconds later with a new start, and the
    # checks judged that second window. Now: refused, one window, its start kept, judged once.
    states = run([poll(0, inflight=2), poll(1, admission="closed", inflight=0), fail(5),
                  fail(16), event(20, "window_closed"), fail(25), fail(40),
                  event(41, "window_closed"), poll(60, generation="g2", admission="open")])
    assert {s.window.start for s in states[1:-1] if s.window} == {1}
    assert all(s.window is not None for s in states[1:-1])
    s = states[-1]
    assert s.last_window is not None and s.last_window.start == 1 and s.last_window.end == 60
    assert s.checks["drained_admission"] is True  # the incumbent drained before it stopped


def test_event_ids_are_bounded() -> None:
    s = RestoreState()
    for i in range(MAX_EVENT_IDS + 5):  # each one accepted: a window opened, then aborted
        s = step(s, event(i, "abort" if i % 2 else "drain_started", f"id-{i}"), BOUNDS)
    assert len(s.event_ids) == MAX_EVENT_IDS
    assert s.event_ids[-1] == f"id-{MAX_EVENT_IDS + 4}" and "id-0" not in s.event_ids


def test_compute_checks_preflight_unknown_without_restored_engine() -> None:
    w = Window(start=0, cause="event", incumbent=Engine("g1"), last_inflight=0, drained=True)
    assert compute_checks(w, None, PREFLIGHT_BOUNDS) == {"drained_admission": True}
    checks = compute_checks(w, Engine("g2"), PREFLIGHT_BOUNDS)
    assert checks == {"fresh_generation": True, "drained_admission": True,
                      "preflight_direct": False, "preflight_routed": False}


# -- phases agree with the engine ----------------------------------------------------------------

def test_engine_answering_without_admission_after_down_is_no_longer_down() -> None:
    base = final([poll(0), poll(10, admission="closed", inflight=0), fail(20)])
    assert base.phase == "down"
    same = step(base, Poll(30, snap(admission=None)), BOUNDS)
    assert same.phase == "draining" and same.window is not None
    new = step(base, Poll(30, snap(generation="g2", admission=None)), BOUNDS)
    assert new.phase == "restoring" and new.window is not None


def test_drain_started_while_unreachable_is_down_and_cannot_be_closed_blind() -> None:
    s = final([poll(0, inflight=1), fail(5), event(8, "drain_started")])
    assert s.window is not None and s.window.start == 8 and s.phase == "down"
    assert refusal(s, "window_closed") is not None
    assert refusal(s, "abort") is None
    answered = step(s, poll(9, admission="closed", inflight=0), BOUNDS)
    assert answered.phase == "drained" and refusal(answered, "window_closed") is None


def test_closed_admission_with_requests_is_draining_and_without_is_drained() -> None:
    states = run([poll(0, inflight=2), poll(10, admission="closed", inflight=2),
                  poll(20, admission="closed", inflight=0)])
    assert [s.phase for s in states] == ["serving", "draining", "drained"]
