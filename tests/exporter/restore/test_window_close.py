"""How the restore window closes and what it judges (docs/interface.md section 6) with plain
timestamps: the checks, preflight gating the close, the window_closed and abort events, checks
with unknown inputs, drained admission.

Bounds used throughout: request cutoff 100 s, restore bound 200 s, down grace 10 s.
"""

from __future__ import annotations

from exporter.restore.window import (
    Engine,
    refusal,
    step,
)
from tests.exporter.restore.restore_helpers import (
    BOUNDS,
    PREFLIGHT_BOUNDS,
    event,
    fail,
    final,
    pf,
    poll,
    run,
)

# -- closing and checks --------------------------------------------------------------------------

def full_restore(restored_generation: str = "g2", restored_container: str = "c1",
                 restored_image: str = "sha256:aaa") -> list:
    return [
        poll(0, inflight=3),
        poll(10, admission="draining", inflight=2),  # window opens at 10
        poll(20, admission="closed", inflight=0),  # drained before cutoff (110)
        fail(30), fail(40),
        event(45, "restore_started"),
        poll(50, generation=restored_generation, admission="closed", inflight=0,
             container=restored_container, image=restored_image),
        poll(60, generation=restored_generation, admission="open", inflight=0,
             container=restored_container, image=restored_image),
    ]


def test_closes_when_engine_answers_open_with_all_checks() -> None:
    states = run(full_restore())
    assert [s.phase for s in states] == [
        "serving", "draining", "drained", "down", "down", "restoring", "restoring", "serving"]
    s = states[-1]
    assert s.window is None
    assert s.checks == {"image": True, "container": True, "fresh_generation": True,
                        "drained_admission": True}
    assert s.last_window is not None
    assert (s.last_window.start, s.last_window.end) == (10, 60)
    assert s.last_window.cause == "drain" and s.last_window.outcome == "in_time"
    assert s.last_seen == Engine("g2", "sha256:aaa", "c1")


def test_restored_into_different_container() -> None:
    s = final(full_restore(restored_container="c2"))
    assert s.checks["container"] is False
    assert s.checks["image"] is True and s.checks["fresh_generation"] is True


def test_restored_with_different_image() -> None:
    s = final(full_restore(restored_image="sha256:bbb"))
    assert s.checks["image"] is False and s.checks["container"] is True


def test_restored_with_the_old_generation() -> None:
    # Restarted (another start time), but reporting the incumbent's generation.
    s = final([poll(0, inflight=3, started_at=1), poll(10, admission="draining", started_at=1),
               fail(30), fail(41), poll(60, generation="g1", started_at=55)])
    assert s.window is None
    assert s.checks["fresh_generation"] is False
    assert s.last_window is not None and s.last_window.restored is not None


def test_restored_into_a_new_container_with_the_old_generation() -> None:
    s = final([*full_restore()[:-1], poll(60, generation="g1", container="c2")])
    assert s.checks["fresh_generation"] is False and s.checks["container"] is False


def test_late_outcome_and_duration() -> None:
    inputs = [*full_restore()[:-1], poll(211, generation="g2")]  # restore deadline 10 + 200 = 210
    s = final(inputs)
    assert s.last_window is not None
    assert s.last_window.outcome == "late"
    assert s.last_window.end - s.last_window.start == 201


def test_close_exactly_at_restore_deadline_is_in_time() -> None:
    s = final([*full_restore()[:-1], poll(210, generation="g2")])
    assert s.last_window is not None and s.last_window.outcome == "in_time"


def test_preflight_gates_the_close() -> None:
    states = run([*full_restore()[:-1], poll(60, generation="g2"), pf(61, "direct"),
                  pf(62, "routed")], PREFLIGHT_BOUNDS)
    assert states[-3].phase == "verifying" and states[-3].window is not None
    assert states[-3].window.restored is not None
    assert states[-2].window is not None  # one probe passed is not enough
    s = states[-1]
    assert s.window is None
    assert s.checks["preflight_direct"] is True and s.checks["preflight_routed"] is True
    assert s.last_window is not None and s.last_window.end == 62


def test_failed_preflight_keeps_verifying_until_both_pass() -> None:
    states = run([*full_restore()[:-1], poll(60, generation="g2"), pf(61, "direct", ok=False),
                  pf(62, "routed"), poll(70, generation="g2"), pf(71, "direct")],
                 PREFLIGHT_BOUNDS)
    assert [s.phase for s in states[-4:]] == ["verifying", "verifying", "verifying", "serving"]
    assert all(s.window is not None for s in states[-4:-1])
    assert states[-1].checks["preflight_direct"] is True


def test_preflight_before_the_engine_is_back_is_ignored() -> None:
    base = final(full_restore()[:-1], PREFLIGHT_BOUNDS)
    assert step(base, pf(55, "direct"), PREFLIGHT_BOUNDS) == base


def test_failure_while_verifying_forgets_restored_engine_and_probes() -> None:
    s = final([*full_restore()[:-1], poll(60, generation="g2"), pf(61, "direct"), fail(65)],
              PREFLIGHT_BOUNDS)
    assert s.window is not None and s.window.restored is None and s.window.preflight == {}
    assert s.phase == "restoring"  # restore_started was seen


def test_window_closed_event_while_unreachable_is_refused_and_changes_nothing() -> None:
    before = final(full_restore()[:-2])  # the engine is down, restore_started seen
    assert before.window is not None and before.window.unreachable
    assert refusal(before, "window_closed") is not None
    s = step(before, event(48, "window_closed", "wc-1"), BOUNDS)
    assert s == before  # not closed, start and deadlines unchanged, the id not recorded
    assert "wc-1" not in s.event_ids


def test_window_closed_event_closes_once_the_engine_answers() -> None:
    s = final([*full_restore()[:-2], poll(50, generation="g2", admission="closed", inflight=0),
               event(52, "window_closed")])
    assert s.window is None and s.phase == "serving"
    assert s.last_window is not None and s.last_window.end == 52
    assert s.last_window.outcome == "in_time"
    # the incumbent went away: the engine answering is what the restore produced
    assert s.checks == {"image": True, "container": True, "fresh_generation": True,
                        "drained_admission": True}


def test_window_closed_event_while_verifying_compares_restored_engine() -> None:
    s = final([*full_restore()[:-1], poll(60, generation="g2", container="c9"),
               event(61, "window_closed")], PREFLIGHT_BOUNDS)
    assert s.window is None
    assert s.checks["container"] is False and s.checks["fresh_generation"] is True


def test_abort_discards_window_and_keeps_the_last_closed_windows_checks() -> None:
    first = final(full_restore(restored_container="c2"))
    assert first.checks["container"] is False  # checks of the first window
    s = final([poll(100, generation="g2", admission="draining", inflight=1, container="c2"),
               event(120, "abort")], state=first)
    assert s.window is None and s.phase == "serving"
    assert s.checks == first.checks and s.judged == first.judged
    assert s.last_window is not None and s.last_window.outcome == "aborted"
    assert (s.last_window.start, s.last_window.end) == (100, 120)


# -- checks with unknown inputs ------------------------------------------------------------------

def test_identity_checks_absent_when_identity_unknown() -> None:
    s = final([poll(0, image=None, container=None), poll(10, admission="closed", inflight=0),
               fail(20), poll(30, generation="g2", image=None, container=None)])
    assert s.window is None
    assert s.checks == {"fresh_generation": True, "drained_admission": True}


def test_container_absent_when_restored_engine_has_no_container_id() -> None:
    s = final([*full_restore()[:-1], poll(60, generation="g2", container=None)])
    assert "container" not in s.checks and s.checks["image"] is True


def test_no_checks_at_all_when_nothing_is_known() -> None:
    # Fresh sidecar: an event opens a window before any snapshot; closed by an event.
    s = final([event(1, "drain_started"), event(2, "window_closed")])
    assert s.window is None and s.checks == {}


def test_drained_admission_absent_when_inflight_never_reported() -> None:
    s = final([poll(0, inflight=None), poll(10, admission="draining", inflight=None), fail(20),
               poll(30, generation="g2", inflight=None)])
    assert s.window is None
    assert "drained_admission" not in s.checks
    assert s.checks["fresh_generation"] is True


def test_unknown_incumbent_is_not_taken_from_the_restored_engine() -> None:
    # Fresh sidecar, engine down from the start: the window opens with no incumbent. The restored
    # engine warming up with admission closed is not the incumbent: nothing to compare it with.
    s = final([fail(0), fail(5), fail(11), poll(20, generation="g2", admission="closed", inflight=0),
               poll(30, generation="g2")])
    assert s.window is None
    assert s.last_window is not None and s.last_window.start == 0
    assert "fresh_generation" not in s.checks
    assert "container" not in s.checks and "image" not in s.checks
    assert s.checks.get("drained_admission") is not True


# -- drained_admission ---------------------------------------------------------------------------

def test_drained_admission_at_the_cutoff_deadline_counts() -> None:
    s = final([poll(0, inflight=5), poll(10, admission="draining", inflight=5),
               poll(110, admission="draining", inflight=0), fail(120), poll(130, generation="g2")])
    assert s.checks["drained_admission"] is True


def test_still_in_flight_past_the_cutoff_is_not_drained() -> None:
    states = run([poll(0, inflight=5), poll(10, admission="draining", inflight=5),
                  poll(50, admission="draining", inflight=3),
                  poll(110.5, admission="draining", inflight=0),  # cutoff deadline was 110
                  fail(120), poll(130, generation="g2")])
    assert states[3].phase == "drained"  # the phase tells the truth, the check is about timing
    assert states[3].window is not None and states[3].window.drained is False
    assert states[-1].checks["drained_admission"] is False


def test_zero_inflight_with_admission_open_is_not_drained() -> None:
    s = final([poll(0, inflight=0), event(5, "drain_started"), poll(10, inflight=0),
               fail(20), poll(30, generation="g2")])
    assert s.checks["drained_admission"] is False


def test_engine_went_away_before_reaching_zero() -> None:
    s = final([poll(0, inflight=5), poll(10, admission="draining", inflight=2), fail(20),
               poll(30, generation="g2")])
    assert s.checks["drained_admission"] is False


def test_restored_engine_at_zero_does_not_make_the_incumbent_drained() -> None:
    s = final([poll(0, inflight=5), poll(10, admission="draining", inflight=2), fail(20),
               poll(30, generation="g2", admission="closed", inflight=0),
               poll(40, generation="g2")])
    assert s.checks["drained_admission"] is False


def test_drained_stays_true_once_reached() -> None:
    s = final([poll(0, inflight=1), poll(10, admission="closed", inflight=0),
               poll(20, admission="closed", inflight=0), poll(30, admission="draining", inflight=0),
               fail(40), poll(50, generation="g2")])
    assert s.checks["drained_admission"] is True


def test_requests_in_flight_when_it_went_away_are_lost_even_after_a_drain() -> None:
    # Admission closed, 0 in flight, then 4 again (the engine's own work, a misreport): when it
    # goes away with 4 in flight, those are lost and the drain check fails.
    s = final([poll(0, inflight=1), poll(10, admission="closed", inflight=0),
               poll(20, admission="closed", inflight=4), poll(30, admission="closed", inflight=4),
               fail(40), poll(50, generation="g2")])
    assert s.judged is not None and s.judged.lost == 4
    assert s.checks["drained_admission"] is False
