"""The incumbent's own incarnation: when it is gone, and a window it closes itself.

A failed poll is not the incumbent going away (one timeout under load looks the same): it is gone
once unreachable for longer than the down grace, or once another incarnation answers, and its own
incarnation answering again means it never went away. A window that the incumbent's own
incarnation closes (a drain called off, an outage it survived) restored nothing: no check is
judged, the previous checks stand.

Bounds: request cutoff 100 s, restore bound 200 s, down grace 10 s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exporter.restore.window import Engine, RestoreState
from tests.exporter.restore.restore_helpers import (
    PREFLIGHT_BOUNDS,
    MockEngine,
    event,
    fail,
    final,
    make_sidecar,
    poll,
    restart,
    run,
    snapshot_obj,
)


def inflight(s: RestoreState) -> int | None:
    assert s.window is not None
    return s.window.incumbent_inflight()


def draining(at: float = 10, n: int = 3) -> RestoreState:
    """g1 seen serving, then draining with `n` requests in flight: a window opened at `at`."""
    return final([poll(0, inflight=n), poll(at, admission="draining", inflight=n)])


def failed_container() -> RestoreState:
    """A judged restore into the wrong container (g2 in c2): its `container` check failed."""
    s = final([poll(0), poll(10, admission="closed", inflight=0), fail(20), fail(31),
               poll(40, generation="g2", container="c2")])
    assert s.checks["container"] is False
    return s


# -- 1: a failed poll is not the incumbent going away -------------------------------------------

def test_a_blip_past_the_cutoff_leaves_the_incumbent_in_flight_and_paging() -> None:
    # The review's repro: the forwarder stopped 0.8 s near the cutoff (110), in-flight pinned
    # at 3. Before: incumbent gone, its in-flight exported 0, the cutoff page silent.
    states = run([fail(105), poll(106, admission="draining", inflight=3),
                  poll(112, admission="draining", inflight=3)], state=draining())
    assert not states[0].window.incumbent_gone  # type: ignore[union-attr]
    assert inflight(states[0]) == 3  # as last seen while it was up
    s = states[-1]
    assert s.phase == "draining" and s.window is not None and not s.window.incumbent_gone
    assert inflight(s) == 3 and s.window.lost == 3  # still in flight past the cutoff


def test_a_timeout_streak_within_the_grace_is_not_gone() -> None:
    s = final([fail(20), fail(25), fail(30)], state=draining())  # 10 s: not longer than grace
    assert s.window is not None and not s.window.incumbent_gone and s.window.lost is None
    assert inflight(s) == 3 and s.phase == "down"
    s = final([fail(30.5)], state=s)
    assert s.window is not None and s.window.incumbent_gone and s.window.lost == 3
    assert inflight(s) == 0


def test_back_as_itself_after_the_grace_it_never_went_away() -> None:
    states = run([fail(20), fail(31), poll(40, admission="draining", inflight=2)],
                 state=draining())
    assert states[1].window.incumbent_gone and inflight(states[1]) == 0  # type: ignore[union-attr]
    s = states[-1]
    assert s.window is not None and not s.window.incumbent_gone
    assert s.window.lost is None and inflight(s) == 2 and s.phase == "draining"


def test_requests_counted_at_the_cutoff_stay_lost_through_a_blip() -> None:
    states = run([poll(111, admission="draining", inflight=2), fail(120), fail(131),
                  poll(140, admission="draining", inflight=1)], state=draining())
    assert states[0].window.lost == 2  # type: ignore[union-attr]
    assert states[2].window.lost == 2 and inflight(states[2]) == 0  # type: ignore[union-attr]
    s = states[-1]
    assert s.window is not None and s.window.lost == 2 and inflight(s) == 1


def test_away_at_the_cutoff_and_back_counts_at_its_first_poll_past_it() -> None:
    s = final([fail(20), fail(31), fail(110), poll(115, admission="draining", inflight=2)],
              state=draining())
    assert s.window is not None and s.window.lost == 2 and inflight(s) == 2


def test_drained_after_a_blip_passes_drained_admission() -> None:
    s = final([fail(20), poll(25, admission="closed", inflight=0), fail(30), fail(41),
               poll(50, generation="g2")], state=draining())
    assert s.checks["drained_admission"] is True
    assert s.judged is not None and s.judged.lost == 0


def test_gone_for_good_when_another_incarnation_answers() -> None:
    s = final([fail(20), fail(31), poll(40, generation="g2", admission="closed", inflight=0),
               fail(50), poll(55, generation="g2")], state=draining())
    assert s.judged is not None and s.judged.lost == 3
    assert s.checks["drained_admission"] is False


def test_a_sidecar_restart_starts_the_failure_streak_again() -> None:
    s = restart(final([fail(20), fail(25)], state=draining()))
    s = final([fail(40)], state=s)
    assert s.window is not None and not s.window.incumbent_gone  # 40 is a new streak's first
    s = final([fail(51)], state=s)
    assert s.window is not None and s.window.incumbent_gone


# -- 2: a window the incumbent's own incarnation closes restored nothing ------------------------

def assert_nothing_restored(s: RestoreState, before: RestoreState) -> None:
    assert s.window is None and s.phase == "serving"
    last = s.last_window
    assert last is not None and last.restored is None and last.nothing_restored
    assert s.checks == before.checks and s.judged == before.judged
    assert s.reference == before.reference
    assert s.unplanned_restarts == before.unplanned_restarts


def test_an_outage_longer_than_the_grace_on_a_healthy_engine_judges_nothing() -> None:
    # Unreachable 30 s (grace 10), back with the same generation: it never restarted. Before:
    # fresh_generation and drained_admission failed, two critical pages.
    before = final([poll(0, inflight=2)])
    s = final([fail(5), fail(16), fail(35), poll(40, inflight=2)], state=before)
    assert_nothing_restored(s, before)
    last = s.last_window
    assert last is not None and (last.start, last.end, last.cause) == (5, 40, "unreachable")
    assert last.outcome == "in_time" and last.lost == 0


def test_past_the_restore_deadline_it_is_late_and_still_judges_nothing() -> None:
    before = failed_container()
    s = final([fail(100), fail(111), fail(299), poll(301, generation="g2", container="c2")],
              state=before)
    assert_nothing_restored(s, before)  # the failed `container` check stands, and pages on
    assert s.checks["container"] is False
    assert s.last_window is not None and s.last_window.outcome == "late"


def test_back_after_the_cutoff_with_requests_lost_none() -> None:
    # Unreachable past the cutoff with 3 in flight, back admitting as itself: nothing was cut.
    before = final([poll(0, inflight=3)])
    s = final([fail(5), fail(16), fail(110), poll(120, inflight=3)], state=before)
    assert_nothing_restored(s, before)
    assert s.last_window is not None and s.last_window.lost == 0


def test_back_draining_past_the_cutoff_pages_then_called_off() -> None:
    before = final([poll(0, inflight=3)])
    states = run([fail(5), fail(16), poll(110, admission="draining", inflight=3),
                  poll(120, inflight=3)], state=before)
    w = states[2].window
    assert w is not None and not w.incumbent_gone and w.lost == 3 and inflight(states[2]) == 3
    assert_nothing_restored(states[-1], before)
    assert states[-1].last_window is not None and states[-1].last_window.lost == 0


@pytest.mark.parametrize("admission", ["draining", "closed"])
def test_a_drain_called_off_judges_nothing(admission: str) -> None:
    before = failed_container()
    s = final([poll(100, generation="g2", container="c2", admission=admission, inflight=2),
               poll(110, generation="g2", container="c2", inflight=1)], state=before)
    assert_nothing_restored(s, before)
    assert s.last_window is not None and s.last_window.outcome == "in_time"
    assert s.last_window.lost == 0 and s.last_window.incumbent is not None


def test_the_incumbent_back_does_not_wait_for_preflight() -> None:
    s = final([poll(0), poll(10, admission="closed", inflight=0), fail(20), fail(31),
               poll(40)], PREFLIGHT_BOUNDS)
    assert s.window is None and s.checks == {}
    assert s.last_window is not None and s.last_window.nothing_restored


def test_window_closed_event_while_the_incumbent_serves_judges_nothing() -> None:
    before = failed_container()
    s = final([fail(100), fail(111), poll(120, generation="g2", container="c2",
                                          admission="closed", inflight=0),
               event(125, "window_closed")], state=before)
    assert_nothing_restored(s, before)


@pytest.mark.parametrize(("restored", "fresh"), [
    ({"generation": "g2"}, True),  # the retained container restored: a new generation
    ({"generation": "g1", "container": "c2"}, False),  # another container, the old generation
    ({"generation": "g1", "started_at": 35}, False),  # restarted, the old generation kept
])
def test_another_incarnation_is_judged(restored: dict, fresh: bool) -> None:
    s = final([poll(0, started_at=1), poll(10, admission="closed", inflight=0, started_at=1),
               fail(20), fail(31), poll(40, **restored)])
    assert s.window is None and s.last_window is not None
    assert s.last_window.restored is not None and not s.last_window.nothing_restored
    assert s.checks["fresh_generation"] is fresh and s.judged == s.last_window


def test_started_at_reported_a_little_differently_is_the_same_incarnation() -> None:
    a, b = Engine("g1", started_at=100.0), Engine("g1", started_at=101.3)
    assert not a.replaced_by(b) and a.replaced_by(Engine("g1", started_at=102.5))
    assert not a.replaced_by(Engine("g1"))  # unknown does not tell


def test_the_next_restore_is_compared_with_the_same_reference() -> None:
    before = failed_container()
    s = final([fail(100), fail(111), poll(120, generation="g2", container="c2")], state=before)
    assert_nothing_restored(s, before)
    redo = final([poll(200, generation="g2", container="c2", admission="closed", inflight=0),
                  fail(210), fail(221), poll(230, generation="g3", container="c1")], state=s)
    assert redo.checks["container"] is True
    assert redo.judged is not None and redo.judged.reference is not None
    assert redo.judged.reference.generation == "g1"


def test_nothing_restored_survives_the_state_file() -> None:
    before = failed_container()
    s = restart(final([fail(100), fail(111), poll(120, generation="g2", container="c2")],
                      state=before))
    assert s.last_window is not None and s.last_window.nothing_restored
    assert s.checks == before.checks


# -- the review's repro, through the whole sidecar (poll loop, keeper, collectors, /status) ------

def test_a_blip_before_the_cutoff_through_the_sidecar(tmp_path: Path) -> None:
    # In-flight pinned at 3, admission draining; the engine unreachable for one poll just
    # before the cutoff (1100), back at the next. Before: /status incumbent_gone, lost 3, and
    # helios_restore_incumbent_inflight_requests 0, so the cutoff page could never fire.
    engine = MockEngine(snapshot_obj(admission="draining", inflight=3))
    clock = [1000.0]
    sidecar = make_sidecar(tmp_path, engine, clock=lambda: clock[0])

    async def cycle(at: float, down: bool = False) -> None:
        clock[0], engine.down = at, down
        await sidecar.loop.cycle()

    async def go() -> None:
        for at, down in ((1000, False), (1099, True), (1101, False), (1102, False)):
            await cycle(at, down)
        await sidecar.client.aclose()

    asyncio.run(go())
    sidecar.loop.close()
    window = sidecar.loop.view.restore.state.window
    assert window is not None and not window.incumbent_gone and window.lost == 3
    get = sidecar.registry.get_sample_value
    assert get("helios_restore_incumbent_inflight_requests") == 3
    assert get("helios_restore_phase", {"phase": "draining"}) == 1
