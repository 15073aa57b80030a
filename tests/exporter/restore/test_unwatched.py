"""Restores nobody watched, found at the sidecar's next start, and restarts outside a window."""

from __future__ import annotations

from exporter.restore.window import RestoreState, step
from tests.exporter.restore.restore_helpers import BOUNDS, fail, final, poll, restart, run


def recorded() -> RestoreState:
    """The sidecar saw g1 (container c1) serving, then stopped; its state file says so."""
    return restart(final([poll(0, inflight=2), poll(5, inflight=1)]))


def test_restore_into_a_new_container_while_the_sidecar_was_down_is_recorded_and_pages() -> None:
    s = step(recorded(), poll(5000, generation="g2", container="c2", started_at=4000), BOUNDS)
    assert s.window is None and s.phase == "serving"
    last = s.last_window
    assert last is not None and last.outcome == "unobserved"
    assert last.start is None and last.cause is None
    assert (last.not_before, last.end) == (4000, 5000)
    assert last.incumbent is not None and last.incumbent.container_id == "c1"
    assert last.restored is not None and last.restored.container_id == "c2"
    assert s.checks == {"image": True, "container": False, "fresh_generation": True}
    assert "drained_admission" not in s.checks  # nobody saw the drain
    assert s.judged == last
    assert s.reference is not None and s.reference.generation == "g1"  # not verified
    # No window saw it coming (a pod restart takes both containers down): it warns too.
    assert s.unplanned_restarts == 1 and s.last_unplanned_restart == 5000


def test_restore_into_the_same_container_while_down_passes_and_becomes_the_reference() -> None:
    s = step(recorded(), poll(5000, generation="g2", container="c1"), BOUNDS)
    assert s.last_window is not None and s.last_window.outcome == "unobserved"
    assert s.last_window.not_before is None  # no started_at: nothing bounds it from below
    assert s.checks == {"image": True, "container": True, "fresh_generation": True}
    assert s.reference is not None and s.reference.generation == "g2"


def test_nothing_happened_while_down_records_nothing() -> None:
    before = recorded()
    s = step(before, poll(5000, inflight=0), BOUNDS)
    assert s.last_window is None and s.checks == {}


def test_restore_found_still_warming_up_opens_a_window_without_an_exact_start() -> None:
    states = run([poll(5000, generation="g2", admission="closed", inflight=0),
                  poll(5010, generation="g2", admission="closed", inflight=0),
                  poll(5020, generation="g2")], state=recorded())
    w = states[0].window
    assert w is not None and not w.start_exact and w.start == 5000
    assert w.incumbent is not None and w.incumbent.generation == "g1" and w.incumbent_gone
    assert w.incumbent_inflight() == 0  # g2's requests are not the incumbent's
    assert states[0].phase == "restoring"
    s = states[-1]
    assert s.last_window is not None and s.last_window.outcome == "unobserved"
    assert s.checks == {"image": True, "container": True, "fresh_generation": True}


def test_engine_down_at_the_sidecar_start_judges_no_drain() -> None:
    s = final([fail(5000), fail(5011), poll(5100, generation="g2")], state=recorded())
    assert s.last_window is not None and s.last_window.start == 5000
    assert s.last_window.outcome == "unobserved"
    assert "drained_admission" not in s.checks and s.checks["fresh_generation"] is True


def test_redo_after_an_unwatched_failed_restore_compares_with_the_verified_engine() -> None:
    s = step(recorded(), poll(5000, generation="g2", container="c2"), BOUNDS)
    s = final([poll(6000, generation="g2", container="c2", admission="draining", inflight=1),
               fail(6010), poll(6030, generation="g3", container="c1")], state=s)
    assert s.checks["container"] is True
    assert s.judged is not None and s.judged.reference is not None
    assert s.judged.reference.generation == "g1"


# -- unplanned restarts ---------------------------------------------------------------------------

def test_generation_change_outside_a_window_is_an_unplanned_restart() -> None:
    states = run([poll(0), poll(5), fail(8), poll(12, generation="g2"), poll(15, generation="g2"),
                  poll(20, generation="g3", admission="draining", inflight=1)])
    assert [s.unplanned_restarts for s in states] == [0, 0, 0, 1, 1, 2]
    assert all(s.last_window is None for s in states)


def test_restore_through_a_window_is_not_unplanned() -> None:
    s = final([poll(0), poll(10, admission="closed", inflight=0), fail(20),
               poll(30, generation="g2"), poll(35, generation="g2")])
    assert s.unplanned_restarts == 0


def test_first_look_counts_only_another_incarnation_than_the_recorded_one() -> None:
    assert step(recorded(), poll(5000, generation="g2"), BOUNDS).unplanned_restarts == 1
    assert step(recorded(), poll(5000), BOUNDS).unplanned_restarts == 0  # the same engine
    # Nothing recorded (a first start): nothing to compare with.
    assert step(RestoreState(), poll(1, generation="g9"), BOUNDS).unplanned_restarts == 0


def test_a_restore_found_warming_up_at_the_start_is_counted_once() -> None:
    states = run([poll(5000, generation="g2", admission="closed", inflight=0),
                  poll(5010, generation="g2")], state=recorded())
    assert [s.unplanned_restarts for s in states] == [1, 1]


def test_a_restore_found_down_at_the_start_is_counted_when_it_answers() -> None:
    # The sidecar starts while the engine is still down (a pod restart, the engine slower to
    # load than the grace): the window opens on its first look; the new incarnation counts.
    states = run([fail(5000), fail(5011), poll(5100, generation="g2")], state=recorded())
    assert [s.unplanned_restarts for s in states] == [0, 0, 1]
    assert states[-1].last_unplanned_restart == 5100
    # The same engine back is nothing restored, and no restart.
    same = final([fail(5000), fail(5011), poll(5100)], state=recorded())
    assert same.unplanned_restarts == 0 and same.last_window is not None
    assert same.last_window.nothing_restored


def test_a_window_on_file_is_no_unplanned_restart() -> None:
    # The sidecar was killed inside a window: the restore it finds is that window's.
    inside = restart(final([poll(0, inflight=1), poll(5, admission="draining", inflight=0)]))
    for first_look in ([poll(5000, generation="g2")],
                       [fail(5000), fail(5011), poll(5100, generation="g2")]):
        s = final(first_look, state=inside)
        assert s.unplanned_restarts == 0 and s.last_window is not None
        assert s.checks["fresh_generation"] is True
