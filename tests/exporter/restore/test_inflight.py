"""The incumbent's in-flight requests and the requests lost (interface v2).

Bounds: request cutoff 100 s, restore bound 200 s, down grace 10 s. The window opens at 10, so
the request-cutoff deadline is 110.
"""

from __future__ import annotations

from exporter.restore.window import RestoreState
from tests.exporter.restore.restore_helpers import PREFLIGHT_BOUNDS, event, fail, final, pf, poll, run


def inflight(s: RestoreState) -> int | None:
    assert s.window is not None
    return s.window.incumbent_inflight()


def test_restored_engine_traffic_never_counts_while_preflight_keeps_failing() -> None:
    # A restored engine serving while the window stays open past the cutoff (routed
    # preflight refused) once paged "requests in flight" with its own traffic.
    states = run([
        poll(0, inflight=3),
        poll(10, admission="draining", inflight=2),
        poll(20, admission="closed", inflight=0),
        fail(30),
        poll(40, generation="g2", admission="open", inflight=4),
        pf(41, "direct"), pf(42, "routed", ok=False),
        poll(120, generation="g2", admission="open", inflight=3),  # past the cutoff
        pf(121, "routed", ok=False),
    ], PREFLIGHT_BOUNDS)
    assert [inflight(s) for s in states[:-1] if s.window] == [2, 0, 0, 0, 0, 0, 0]
    assert all(s.phase == "verifying" for s in states[4:])
    s = states[-1]
    assert s.window is not None and s.window.lost == 0 and inflight(s) == 0


def test_crashed_incumbent_requests_are_lost_not_in_flight() -> None:
    states = run([poll(0, inflight=5), poll(10, admission="draining", inflight=3), fail(20),
                  fail(31), fail(115), poll(130, generation="g2")])
    assert inflight(states[1]) == 3
    # One failed poll: not gone yet (a timeout under load looks the same).
    assert inflight(states[2]) == 3 and states[2].window.lost is None  # type: ignore[union-attr]
    # Unreachable for longer than the down grace (10 s): gone, its requests lost.
    assert inflight(states[3]) == 0 and states[3].window.lost == 3  # type: ignore[union-attr]
    assert inflight(states[4]) == 0  # past the cutoff: nothing still running to page about
    s = states[-1]
    assert s.judged is not None and s.judged.lost == 3
    assert s.checks["drained_admission"] is False


def test_still_in_flight_past_the_cutoff_is_lost_even_if_it_drains_later() -> None:
    states = run([poll(0, inflight=5), poll(10, admission="draining", inflight=5),
                  poll(100, admission="draining", inflight=2),
                  poll(111, admission="draining", inflight=2),  # cutoff was 110
                  poll(130, admission="closed", inflight=0), fail(140),
                  poll(150, generation="g2")])
    assert states[2].window.lost is None  # type: ignore[union-attr]
    assert states[3].window.lost == 2 and inflight(states[3]) == 2  # type: ignore[union-attr]
    assert inflight(states[4]) == 0 and states[4].window.lost == 2  # type: ignore[union-attr]
    s = states[-1]
    assert s.judged is not None and s.judged.lost == 2
    assert s.checks["drained_admission"] is False


def test_replaced_by_another_generation_without_a_failed_poll() -> None:
    s = final([poll(0, inflight=2), poll(10, admission="draining", inflight=2),
               poll(20, generation="g2", admission="closed", inflight=7)])
    assert s.window is not None and s.window.incumbent_gone
    assert inflight(s) == 0 and s.window.lost == 2
    assert s.window.last_inflight == 2  # as last seen while it was up: not g2's 7


def test_a_restart_that_kept_the_generation_does_not_count() -> None:
    # A restore that kept the old generation (another start): its traffic is not the
    # incumbent's either.
    s = final([poll(0, inflight=1, started_at=1), poll(10, admission="closed", inflight=0,
                                                           started_at=1),
               fail(20), poll(30, admission="closed", inflight=6, started_at=25)])
    assert inflight(s) == 0 and s.window is not None and s.window.lost == 0
    assert s.window.incumbent_gone and s.phase == "restoring"


def test_the_incumbent_back_after_a_blip_is_tracked_again() -> None:
    # The same incarnation answers after one failed poll: it never went away.
    s = final([poll(0, inflight=1), poll(10, admission="closed", inflight=2), fail(20),
               poll(30, admission="closed", inflight=6)])
    assert s.window is not None and not s.window.incumbent_gone
    assert inflight(s) == 6 and s.window.lost is None and s.phase == "draining"


def test_unknown_when_never_reported() -> None:
    states = run([poll(0, inflight=None), poll(10, admission="draining", inflight=None), fail(20),
                  fail(31), poll(40, generation="g2", inflight=None)])
    assert inflight(states[1]) is None
    assert inflight(states[2]) is None  # a blip: still unknown
    assert inflight(states[3]) == 0  # gone: nothing of it is running, whatever it had
    s = states[-1]
    assert s.judged is not None and s.judged.lost is None
    assert "drained_admission" not in s.checks


def test_window_opened_by_unreachability_loses_what_was_last_seen() -> None:
    s = final([poll(0, inflight=4), fail(5), fail(16)])
    assert s.window is not None and s.window.cause == "unreachable"
    assert s.window.last_inflight == 4 and s.window.lost == 4 and inflight(s) == 0


def test_drain_called_off_loses_nothing() -> None:
    s = final([poll(0, inflight=3), event(5, "drain_started"), poll(10, inflight=3),
               event(20, "window_closed")])
    assert s.last_window is not None and s.last_window.lost == 0


def test_inflight_of_an_engine_without_admission_is_unknown_not_the_previous_one() -> None:
    s = final([poll(0, inflight=4), poll(5, generation="g2", admission=None),
               event(6, "drain_started")])
    assert s.window is not None and s.window.incumbent is not None
    assert s.window.incumbent.generation == "g2" and inflight(s) is None


def test_restart_with_a_window_keeps_the_incumbent_inflight() -> None:
    from exporter.restore import store

    s = final([poll(0, inflight=3), poll(10, admission="draining", inflight=2)])
    back = store.decode(store.encode(s))
    assert inflight(back) == 2
    assert inflight(final([fail(20)], state=back)) == 2  # a blip
    assert inflight(final([fail(20), fail(31)], state=back)) == 0

