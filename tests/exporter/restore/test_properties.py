"""Property tests of the restore window: random polls, failures, events and probes."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporter.restore import store
from exporter.restore.window import (
    CHECKS,
    Bounds,
    Engine,
    Event,
    Input,
    Poll,
    Preflight,
    RestoreState,
    Window,
    restarted,
    step,
)
from exporter.snapshot.model import Snapshot
from exporter.snapshot.parse import snapshot_from_obj

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


RESTART = "restart"  # the sidecar restarts: the state goes through its file


class Restart:
    def __init__(self, at: float) -> None:
        self.at = at


INFLIGHT_BASE = {"g1": 0, "g2": 10, "g3": 20}  # each generation's in-flight lies in base..base+3


@cache
def _snap(generation: str, admission: str | None, inflight: int | None, container: str | None,
          image: str | None, started_at: float | None) -> Snapshot:
    obj: dict = {"schema_version": 1, "generation": generation}
    ident = {k: v for k, v in (("container_id", container), ("image_digest", image)) if v}
    if ident:
        obj["identity"] = ident
    if started_at is not None:
        obj["started_at"] = started_at
    if admission is not None:
        obj["admission"] = {"state": admission}
        if inflight is not None:
            obj["admission"]["inflight_requests"] = INFLIGHT_BASE[generation] + inflight
    return snapshot_from_obj(obj)


snapshots = st.builds(
    _snap,
    st.sampled_from(["g1", "g2", "g3"]),
    st.sampled_from(["open", "open", "draining", "closed", None]),
    st.one_of(st.none(), st.integers(0, 3)),
    st.sampled_from(["c1", "c2", None]),
    st.sampled_from(["sha256:a", "sha256:b", None]),
    st.sampled_from([None, 1.7e9, 1.75e9, 1.9e9]),
)

# (delay, what): what is a snapshot, None (failed poll), an event kind or a preflight result.
actions = st.tuples(
    st.one_of(st.floats(0.001, 30, allow_nan=False), st.sampled_from([0.0, 1.0, 10.0, 0.1])),
    st.one_of(
        snapshots,
        st.none(), st.none(), st.none(),  # failures weighted up: streaks past the grace are common
        st.sampled_from(["drain_started", "restore_started", "window_closed", "abort"]),
        st.tuples(st.sampled_from(["direct", "routed"]), st.booleans()),
        st.just(RESTART),
    ),
)

bounds_st = st.builds(
    lambda cutoff, extra, grace, probes: Bounds(cutoff, cutoff + extra, grace, probes),
    st.floats(0.5, 200, allow_nan=False),
    st.floats(0, 200, allow_nan=False),
    st.sampled_from([0.0, 0.5, 10.0, 60.0]),
    st.sampled_from([(), ("direct",), ("direct", "routed")]),
)

start_at = st.floats(1.7e9, 1.8e9, allow_nan=False)


def inputs_of(t0: float, seq: list) -> list[Input | Restart]:
    out: list[Input | Restart] = []
    now = t0
    for i, (delay, what) in enumerate(seq):
        now += delay
        if what is None or isinstance(what, Snapshot):
            out.append(Poll(now, what))
        elif what == RESTART:
            out.append(Restart(now))
        elif isinstance(what, str):
            out.append(Event(now, f"ev-{i}", what))  # type: ignore[arg-type]
        else:
            out.append(Preflight(now, what[0], what[1]))
    return out


def admission_of(snap: Snapshot) -> str:
    return snap.admission.state if snap.admission else "open"


def advance(state: RestoreState, inp: Input | Restart, bounds: Bounds) -> RestoreState:
    if isinstance(inp, Restart):
        return store.decode(store.encode(state))
    return step(state, inp, bounds)


def inflight_of(engine: Engine | None, value: int) -> bool:
    """`value` is an in-flight count `engine`'s generation can have reported."""
    return engine is not None and 0 <= value - INFLIGHT_BASE[engine.generation] <= 3


@SETTINGS
@given(start_at, st.lists(actions, max_size=40), bounds_st)
# Found by hypothesis: the window a restarted sidecar opened on its first look at an unreachable
# engine, closed by window_closed once another container answered, counts an unplanned restart.
@example(1_700_000_000.0, [(1.0, _snap("g1", "open", None, "c1", "sha256:a", None)),
                           (1.0, RESTART), (1.0, None), (1.0, None),
                           (1.0, _snap("g1", "open", None, "c2", "sha256:a", None)),
                           (1.0, "window_closed")],
         Bounds(request_cutoff=1.0, restore_bound=1.0, down_grace=0.0, preflight=("direct",)))
def test_window_start_and_opening_causes(t0: float, seq: list, bounds: Bounds) -> None:
    state = RestoreState()
    streak_first: float | None = None  # first failure since the last success, close or restart
    last_close: float | None = None
    restarted_since_open = False
    for inp in inputs_of(t0, seq):
        before = state
        state = advance(state, inp, bounds)
        if isinstance(inp, Restart):
            streak_first = None
            restarted_since_open = True
            assert state.window == (None if before.window is None else
                                    restarted(before).window)
            continue
        failed = isinstance(inp, Poll) and inp.snapshot is None
        if isinstance(inp, Poll):
            streak_first = (streak_first if streak_first is not None else inp.at) if failed else None
        was, now_open = before.window, state.window
        if was is not None and now_open is not None:
            # The start never moves while open, whatever arrives (window_closed included).
            assert now_open.start == was.start and now_open.cause == was.cause
        if isinstance(inp, Event) and inp.kind == "window_closed" and was and was.unreachable:
            assert state == before  # refused: nothing closes, no id recorded
        if was is None and now_open is not None:
            restarted_since_open = False
            # A window opens only for a cause of docs/interface.md section 6.1, at the right start.
            if isinstance(inp, Event):
                assert inp.kind == "drain_started"
                assert now_open.start == inp.at and now_open.cause == "event"
            elif isinstance(inp, Poll) and inp.snapshot is not None:
                assert admission_of(inp.snapshot) in ("draining", "closed")
                assert now_open.start == inp.at and now_open.cause == "drain"
            elif failed:
                assert streak_first is not None
                assert inp.at - streak_first > bounds.down_grace
                assert now_open.start == streak_first and now_open.cause == "unreachable"
            else:
                raise AssertionError(f"window opened by {inp!r}")
            assert last_close is None or now_open.start >= last_close
        if was is not None and now_open is None:
            # Closes only on an engine answering open, a window_closed/abort event or a probe.
            assert not failed
            if isinstance(inp, Poll):
                assert inp.snapshot is not None and admission_of(inp.snapshot) == "open"
            if isinstance(inp, Event):
                assert inp.kind in ("window_closed", "abort")
            last = state.last_window
            assert last is not None and last.start == was.start and last.end == inp.at
            deadline = was.start + bounds.restore_bound
            if isinstance(inp, Event) and inp.kind == "abort":
                assert last.outcome == "aborted"
                assert state.checks == before.checks  # an abort keeps the last judgment
            else:
                # Never a claim without evidence.
                assert last.not_before is not None and last.not_before <= last.end
                if last.outcome == "in_time":
                    assert last.end <= deadline and was.start_exact
                if last.outcome == "late":
                    assert last.not_before > deadline
                if was.start_exact and not restarted_since_open:  # watched all along
                    assert last.outcome == ("in_time" if inp.at <= deadline else "late")
                if state.judged is last and last.lost:
                    assert state.checks["drained_admission"] is False
            last_close = inp.at
            streak_first = None  # a failure streak must begin anew after a close
        if was is None and now_open is None and state.last_window != before.last_window:
            # A restore nobody watched: found on the first snapshot after a restart.
            assert isinstance(inp, Poll) and inp.snapshot is not None
            assert not before.seen_since_start and before.last_seen is not None
            assert state.last_window is not None and state.last_window.outcome == "unobserved"
            assert state.last_window.start is None and "drained_admission" not in state.checks
        check_incarnation(before, state, inp, bounds, streak_first)
        if now_open is not None:
            assert now_open.start <= inp.at
            assert now_open.deadline(bounds, "request_cutoff") == now_open.start + bounds.request_cutoff
            assert now_open.deadline(bounds, "restore") == now_open.start + bounds.restore_bound
            if bounds.preflight and now_open.preflight:
                assert set(now_open.preflight) <= {"direct", "routed"}
            # The incumbent's in-flight: its own, as last seen; never another engine's.
            inflight = now_open.incumbent_inflight()
            assert inflight is None or inflight == 0 or inflight_of(now_open.incumbent, inflight)
            if now_open.incumbent_gone:
                assert inflight == 0
        else:
            assert state.phase == "serving"
        assert set(state.checks) <= set(CHECKS)
        if state.checks:
            assert not any(k.startswith("preflight_") and k[10:] not in bounds.preflight
                           for k in state.checks)
        assert state.unplanned_restarts - before.unplanned_restarts in (0, 1)


def incumbent_answers(window: Window | None, inp: Input) -> bool:
    """`inp` is a snapshot of `window`'s incumbent's own incarnation."""
    return (window is not None and window.incumbent is not None and isinstance(inp, Poll)
            and inp.snapshot is not None
            and not window.incumbent.replaced_by(Engine.of(inp.snapshot)))


def check_incarnation(before: RestoreState, state: RestoreState, inp: Input, bounds: Bounds,
                      streak_first: float | None) -> None:
    """The incumbent is gone only after the grace or for another incarnation; a window its own
    incarnation closes judges nothing; a restart counts only a new incarnation."""
    was, now_open = before.window, state.window
    failed = isinstance(inp, Poll) and inp.snapshot is None
    if was is not None and now_open is not None and now_open.incumbent_gone \
            and not was.incumbent_gone:
        # Gone: unreachable for longer than the grace, or another incarnation answered.
        assert isinstance(inp, Poll)
        if failed:
            assert streak_first is not None and inp.at - streak_first > bounds.down_grace
        else:
            assert inp.snapshot is not None and not incumbent_answers(was, inp)
    if incumbent_answers(was, inp) and now_open is not None:
        assert isinstance(inp, Poll) and inp.snapshot is not None
        assert not now_open.incumbent_gone  # its own incarnation answering: never gone
        adm = inp.snapshot.admission
        if adm is not None and adm.inflight_requests is not None:
            assert now_open.incumbent_inflight() == adm.inflight_requests
    if was is not None and now_open is None and incumbent_answers(was, inp):
        # Closed by the incumbent's own incarnation admitting again: nothing restored.
        last = state.last_window
        assert last is not None and last.nothing_restored and last.lost in (0, None)
        assert state.checks == before.checks and state.judged == before.judged
        assert state.unplanned_restarts == before.unplanned_restarts
    if state.judged is not before.judged and state.judged is not None:
        judged = state.judged
        assert judged.restored is not None  # a judgment is always of a restored engine
        if judged.incumbent is not None:
            assert judged.incumbent.replaced_by(judged.restored)
    if state.unplanned_restarts != before.unplanned_restarts:
        # Only a snapshot of another incarnation than the one seen last counts, outside a window
        # or closing one the sidecar opened on its first look at an unreachable engine; that
        # window may also be closed by a window_closed event once another incarnation answered
        # (docs/interface.md section 6.8: "closed by another incarnation than the one on file").
        assert state.last_unplanned_restart == inp.at
        if isinstance(inp, Event):
            assert inp.kind == "window_closed" and was is not None and state.last_window
            engine = state.last_window.restored
            assert engine is not None
        else:
            assert isinstance(inp, Poll) and inp.snapshot is not None
            engine = Engine.of(inp.snapshot)
        if was is None:
            assert before.last_seen is not None and before.last_seen.replaced_by(engine)
        else:
            assert was.cause == "unreachable" and not was.start_exact and now_open is None
            assert was.incumbent is not None and was.incumbent.replaced_by(engine)


@SETTINGS
@given(start_at, st.lists(actions, max_size=40), bounds_st)
def test_store_round_trip_is_exact(t0: float, seq: list, bounds: Bounds) -> None:
    state = RestoreState()
    for inp in inputs_of(t0, seq):
        state = advance(state, inp, bounds)
        back = store.decode(store.encode(state))
        # What one process watched (a failure streak, having seen the restore incomplete) is
        # deliberately not carried over a restart; everything else is, exactly.
        assert back == restarted(state)
        if state.window is not None:
            assert back.window is not None
            assert back.window.start == state.window.start  # exact, not just to the millisecond
            assert back.window.incumbent == state.window.incumbent
            assert back.window.deadline(bounds, "restore") == state.window.deadline(bounds, "restore")
        # Continuing from the decoded state behaves like continuing from a restarted one.
        at = inp.at + 1
        for nxt in (Poll(at, None), Poll(at, _snap("g2", "open", 0, "c1", None, None))):
            assert step(back, nxt, bounds) == step(restarted(state), nxt, bounds)


@SETTINGS
@given(st.floats(0, 4e9, allow_nan=False, allow_infinity=False))
def test_start_survives_encoding_to_the_last_bit(start: float) -> None:
    state = step(RestoreState(), Event(start, "e", "drain_started"), Bounds())
    back = store.decode(store.encode(state))
    assert back.window is not None
    assert back.window.start == start
    assert math.copysign(1, back.window.start) == math.copysign(1, start)


# One engine that never restarts (the same generation, container and start throughout): its
# blips, outages, drains called off and events never make a judgment or an unplanned restart.
same_engine = st.builds(
    _snap, st.just("g1"), st.sampled_from(["open", "draining", "closed", None]),
    st.one_of(st.none(), st.integers(0, 3)), st.just("c1"), st.just("sha256:a"),
    st.sampled_from([None, 1.7e9]),  # a snapshot that leaves started_at out does not tell
)
quiet_actions = st.tuples(
    st.one_of(st.floats(0.001, 30, allow_nan=False), st.sampled_from([0.0, 1.0, 10.0, 0.1])),
    st.one_of(same_engine, same_engine, st.none(), st.none(),
              st.sampled_from(["drain_started", "restore_started", "window_closed", "abort"]),
              st.tuples(st.sampled_from(["direct", "routed"]), st.booleans()),
              st.just(RESTART)),
)


@SETTINGS
@given(start_at, st.lists(quiet_actions, min_size=1, max_size=60), bounds_st)
def test_an_engine_that_never_restarts_is_never_judged(t0: float, seq: list,
                                                      bounds: Bounds) -> None:
    # A judged restore into the wrong container, then g1 (c1) seen serving.
    judged = step(RestoreState(), Poll(t0 - 1, _snap("g1", "open", 0, "c1", "sha256:a", 1.7e9)),
                  bounds)
    state = replace(judged, checks={"container": False, "fresh_generation": True},
                    reference=Engine("g0", container_id="c1"))
    checks, reference = state.checks, state.reference
    streak: float | None = None  # first failed poll since an answer, an abort, a restart
    for inp in inputs_of(t0, seq):
        before = state
        state = advance(state, inp, bounds)
        if isinstance(inp, Poll):
            streak = (inp.at if streak is None else streak) if inp.snapshot is None else None
        elif isinstance(inp, Restart) or (isinstance(inp, Event) and inp.kind == "abort"
                                          and before.window is not None):
            streak = None
        if state.window is not None and isinstance(inp, Poll) and inp.snapshot is None:
            assert streak is not None
            assert state.window.incumbent_gone == (
                (before.window is not None and before.window.incumbent_gone)
                or inp.at - streak > bounds.down_grace)
        assert state.checks == checks and state.judged is None and state.reference == reference
        assert state.unplanned_restarts == 0
        last = state.last_window
        if last is not None and last.outcome != "aborted":
            assert last.nothing_restored and last.lost in (0, None)
        window = state.window
        if window is not None and isinstance(inp, Poll) and inp.snapshot is not None:
            assert not window.incumbent_gone  # it answered: it is not gone
            adm = inp.snapshot.admission
            if adm is not None and adm.inflight_requests is not None:
                assert window.incumbent_inflight() == adm.inflight_requests
        if window is not None and before.window is not None and window.incumbent_gone \
                and not before.window.incumbent_gone:
            assert isinstance(inp, Poll) and inp.snapshot is None
