"""Time of record and outcome from evidence (docs/interface.md section 6.5).

Bounds: request cutoff 100 s, restore bound 200 s, down grace 10 s. The windows below open at 10,
so the restore deadline is 210.
"""

from __future__ import annotations

from exporter.restore.window import RestoreState
from tests.exporter.restore.restore_helpers import event, fail, final, poll, restart


def down_at_40() -> RestoreState:
    """Drained at 20, the engine down from 30; the last poll before the sidecar dies is at 40."""
    return final([poll(0, inflight=1), poll(10, admission="draining", inflight=1),
                  poll(20, admission="closed", inflight=0), fail(30), fail(40)])


def test_watched_restore_is_recorded_at_the_observation() -> None:
    s = final([poll(205, generation="g2", started_at=150)], state=down_at_40())
    assert s.last_window is not None
    assert s.last_window.outcome == "in_time"
    assert s.last_window.end == 205 and s.last_window.not_before == 205


def test_sidecar_down_over_the_deadline_on_time_restore_is_not_late() -> None:
    # The engine started at 150 and the sidecar came back at 400: the restore ended between the
    # two; the deadline (210) lies between, so the outcome is not claimed either way.
    s = final([poll(400, generation="g2", started_at=150)], state=restart(down_at_40()))
    last = s.last_window
    assert last is not None and last.outcome == "unobserved"
    assert (last.not_before, last.end) == (150, 400)
    assert s.checks["fresh_generation"] is True and s.checks["drained_admission"] is True


def test_sidecar_back_before_the_deadline_proves_in_time() -> None:
    s = final([poll(190, generation="g2", started_at=150)], state=restart(down_at_40()))
    assert s.last_window is not None and s.last_window.outcome == "in_time"
    assert (s.last_window.not_before, s.last_window.end) == (150, 190)


def test_engine_started_after_the_deadline_proves_late() -> None:
    s = final([poll(400, generation="g2", started_at=250)], state=restart(down_at_40()))
    assert s.last_window is not None and s.last_window.outcome == "late"
    assert s.last_window.not_before == 250


def test_a_started_at_after_the_first_observation_is_not_evidence() -> None:
    # An engine clock ahead of the sidecar's: not believed; the window start bounds it instead.
    s = final([poll(400, generation="g2", started_at=999)], state=restart(down_at_40()))
    assert s.last_window is not None and s.last_window.outcome == "unobserved"
    assert s.last_window.not_before == 40  # the last poll that saw it down


def test_without_started_at_the_last_persisted_observation_bounds_it() -> None:
    late_seen = final([fail(230)], state=down_at_40())  # still down past the deadline
    s = final([poll(400, generation="g2")], state=restart(late_seen))
    assert s.last_window is not None and s.last_window.outcome == "late"
    assert s.last_window.not_before == 230


def test_seen_down_after_the_restart_the_close_is_watched_again() -> None:
    s = final([fail(300), poll(305, generation="g2", started_at=150)],
              state=restart(down_at_40()))
    assert s.last_window is not None and s.last_window.outcome == "late"
    assert s.last_window.not_before == 305


def test_two_restarts_mid_window_keep_start_and_evidence() -> None:
    s = restart(final([fail(100)], state=restart(down_at_40())))
    assert s.window is not None and s.window.start == 10 and s.window.last_unrestored == 100
    s = final([poll(260, generation="g2", started_at=120)], state=s)
    assert s.last_window is not None and s.last_window.start == 10
    assert s.last_window.outcome == "unobserved" and s.last_window.not_before == 120


def test_window_opened_on_the_first_look_after_a_start_cannot_be_in_time() -> None:
    # The sidecar starts and finds the engine draining: it may have been draining for an hour.
    s = final([poll(10, admission="draining", inflight=1)], state=RestoreState())
    assert s.window is not None and not s.window.start_exact
    s = final([fail(20), poll(50, generation="g2")], state=s)
    assert s.last_window is not None and s.last_window.outcome == "unobserved"
    assert s.last_window.start_exact is False
    late = final([poll(10, admission="draining", inflight=1), fail(20),
                  poll(215, generation="g2")])
    assert late.last_window is not None and late.last_window.outcome == "late"


def test_window_seen_open_after_the_engine_was_seen_serving_is_exact() -> None:
    s = final([poll(0), poll(10, admission="draining", inflight=1)])
    assert s.window is not None and s.window.start_exact


def test_unreachable_since_the_start_is_not_an_exact_start() -> None:
    s = final([fail(0), fail(5), fail(11)], state=restart(final([poll(-100)])))
    assert s.window is not None and s.window.start == 0 and not s.window.start_exact
    assert s.window.last_inflight is None  # in-flight from before the restart is not evidence


def test_event_window_closed_by_event_is_recorded_at_the_events() -> None:
    s = final([event(1, "drain_started"), event(150, "window_closed")])
    assert s.last_window is not None and s.last_window.outcome == "in_time"
    s = final([event(1, "drain_started"), event(250, "window_closed")])
    assert s.last_window is not None and s.last_window.outcome == "late"
