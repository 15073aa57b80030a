"""The restore window as a pure state machine (docs/interface.md section 6).

`step(state, input, bounds)` returns the next `RestoreState`; it reads no clock and does no I/O,
so every transition is unit-tested with plain numbers and the restore keeper persists whatever
comes out.
`refusal(state, kind)` says why an event would be refused (the events API answers 409 then;
exporter/restore/answers.py is the table of every event in every state).
"""

from __future__ import annotations

from dataclasses import replace

from exporter.restore.answers import UNREACHABLE_REFUSAL, refusal
from exporter.restore.checks import CHECKS, compute_checks, identity_checks, verified
from exporter.restore.model import (
    CAUSES,
    EVENT_KINDS,
    MAX_EVENT_IDS,
    OUTCOMES,
    PHASES,
    Bounds,
    Cause,
    Engine,
    Event,
    EventKind,
    Input,
    LastWindow,
    Outcome,
    Phase,
    Poll,
    Preflight,
    RestoreState,
    Window,
    process_only,
)
from exporter.restore.record import judge, unwatched
from exporter.snapshot.model import Snapshot

__all__ = [
    "CAUSES", "CHECKS", "EVENT_KINDS", "MAX_EVENT_IDS", "OUTCOMES", "PHASES",
    "UNREACHABLE_REFUSAL", "Bounds", "Cause", "Engine", "Event", "EventKind", "Input",
    "LastWindow", "Outcome", "Phase", "Poll", "Preflight", "RestoreState", "Window",
    "compute_checks", "is_duplicate", "refusal", "restarted", "step", "unverified",
]


def is_duplicate(state: RestoreState, event_id: str) -> bool:
    return event_id in state.event_ids


def restarted(state: RestoreState) -> RestoreState:
    """What a new sidecar process knows of `state`, which is what the state file holds: failure
    streaks, what this process watched and the in-flight count of the last snapshot outside a
    window do not carry over (the store reads every state file through this, and the keeper
    writes the file only when this changes)."""
    window = state.window
    if window is not None:
        window = replace(window, **process_only(Window))
    return replace(state, window=window, **process_only(RestoreState))


def unverified(state: RestoreState) -> bool:
    """The last judged restore failed a check of its own: redo windows compare with the
    engine verified before it, not with it."""
    return not verified(state.checks)


def step(state: RestoreState, inp: Input, bounds: Bounds) -> RestoreState:
    if isinstance(inp, Event):
        return _on_event(state, inp, bounds)
    if isinstance(inp, Preflight):
        return _on_preflight(state, inp, bounds)
    if inp.snapshot is None:
        if inp.answered:
            # The engine is there, its snapshot unusable: not an outage (no window opens, the
            # grace does not run), and nothing is learnt about the window either.
            return replace(state, unreachable_since=None, unreachable_mono=None)
        return _on_failure(state, inp.at, _mono(inp), bounds)
    return _on_snapshot(state, inp.snapshot, inp.at, _mono(inp), bounds)


def _mono(inp: Input) -> float:
    """The input's monotonic time (its wall-clock time when it has none: one timeline)."""
    return inp.at if inp.mono is None else inp.mono


def _open(state: RestoreState, start: float, mono: float, cause: Cause,
          incumbent: Engine | None, exact: bool = True) -> Window:
    # In-flight is known only from a snapshot of this process (`restarted` forgets it).
    reference = state.reference if unverified(state) else None
    return Window(start=start, cause=cause, incumbent=incumbent, last_inflight=state.last_inflight,
                  reference=reference, start_exact=exact, start_mono=mono)


def _unplanned(state: RestoreState, at: float) -> RestoreState:
    """A new incarnation that no window saw coming (docs/interface.md section 6.8)."""
    return replace(state, unplanned_restarts=state.unplanned_restarts + 1,
                   last_unplanned_restart=at)


def _observed(window: Window, at: float) -> Window:
    """An observation of the engine that leaves the restore incomplete."""
    return replace(window, last_unrestored=at, watched=True)


def _on_snapshot(state: RestoreState, snap: Snapshot, now: float, mono: float,
                 bounds: Bounds) -> RestoreState:
    engine = Engine.of(snap)
    first = not state.seen_since_start
    previous = state.last_seen
    inflight = snap.admission.inflight_requests if snap.admission else None
    state = replace(state, unreachable_since=None, unreachable_mono=None,
                    seen_since_start=True, last_seen=engine,
                    last_inflight=inflight, outage_aborted=False)
    admission = snap.admission.state if snap.admission else None
    window = state.window
    if window is None:
        if previous is not None and previous.replaced_by(engine):
            if first:
                return _restored_unwatched(state, previous, engine, admission, now, mono)
            state = _unplanned(state, now)
        if admission in (None, "open"):
            # No admission section: the engine says neither that it drains nor that it admits
            # again; it is reachable, nothing more (a window is closed by an event then).
            return replace(state, phase="serving")
        # The engine itself says it is draining or closed: the window opens now.
        window = _open(state, now, mono, "drain", engine, exact=not first)
    now = window.record(now, mono)  # inside the window: timed from its start
    window = replace(window, unreachable=False)
    if window.incumbent is not None:
        is_incumbent = not window.incumbent.replaced_by(engine)
    else:
        # No incumbent known (fresh sidecar): the first engine seen is it, unless the engine has
        # gone away since the window opened; then whoever answers may already be the restored one.
        is_incumbent = not window.seen_not_open
    if is_incumbent:
        window = _incumbent_answers(window, engine, inflight, now, bounds)
    elif not window.incumbent_gone:  # replaced by another incarnation: its requests are gone
        lost = window.lost if window.lost is not None else window.last_inflight
        window = replace(window, incumbent_gone=True, lost=lost)
    if admission is None:
        # Reachable, admission unknown: a new engine is restoring; the incumbent is as it was,
        # but no longer down.
        phase: Phase = state.phase if state.phase not in ("down", "restoring") else "draining"
        return replace(state, phase=phase if is_incumbent else "restoring",
                       window=_observed(window, now))
    if admission != "open":
        # Drained counts only before the engine went away and before the request cutoff.
        drained = window.drained or (
            inflight == 0
            and is_incumbent
            and now <= window.deadline(bounds, "request_cutoff")
        )
        window = replace(window, drained=drained, seen_not_open=True)
        # Phases name what happens to requests: the incumbent draining (admission draining or
        # closed) still has requests in flight, or none; another engine is being restored.
        phase = "restoring" if not is_incumbent else "drained" if inflight == 0 else "draining"
        return replace(state, phase=phase, window=_observed(window, now))
    if is_incumbent:
        if not window.seen_not_open:
            # A window opened by an event waits until the engine is seen going away.
            return replace(state, phase="draining", window=_observed(window, now))
        # The incumbent's own incarnation admits again (a drain called off, an outage it
        # survived): it never restarted, nothing was restored, and there is nothing to judge.
        return _close(state, replace(window, restored=None), now, bounds)
    window = replace(window, restored=engine)
    if all(window.preflight.get(p) for p in bounds.preflight):
        return _close(state, window, now, bounds)
    return replace(state, phase="verifying", window=_observed(window, now))


def _incumbent_answers(window: Window, engine: Engine, inflight: int | None, now: float,
                       bounds: Bounds) -> Window:
    """The incumbent's own incarnation answered: it is not gone, whatever the polls before said
    (an unreachable engine that answers again as itself never went away, so nothing it had in
    flight was lost by going); its in-flight count is tracked, and counted lost at the first
    poll past the request cutoff."""
    if window.incumbent is None:
        window = replace(window, incumbent=engine)
    if window.incumbent_gone:
        window = replace(window, incumbent_gone=False,
                         lost=window.lost if window.lost_at_cutoff else None)
    if inflight is None:
        return window
    window = replace(window, last_inflight=inflight)
    if window.lost is None and now > window.deadline(bounds, "request_cutoff"):
        window = replace(window, lost=inflight, lost_at_cutoff=True)  # still in flight
    return window


def _restored_unwatched(state: RestoreState, previous: Engine, engine: Engine,
                        admission: str | None, now: float, mono: float) -> RestoreState:
    """The first snapshot since this sidecar started shows another engine than the one recorded
    last, and no window was open: a restore (or restart) happened while nobody watched. It is
    an unplanned restart too: no window saw it coming."""
    state = _unplanned(state, now)
    reference = state.reference if unverified(state) and state.reference else previous
    if admission in ("draining", "closed"):
        # Still warming up (or draining already): a window whose start nobody saw; the engine
        # recorded last is the incumbent, gone, its requests unknown.
        window = Window(start=now, cause="drain", incumbent=previous, reference=reference,
                        incumbent_gone=True, seen_not_open=True, start_exact=False,
                        start_mono=mono)
        return replace(state, phase="restoring", window=_observed(window, now))
    checks = identity_checks(reference, previous, engine)  # the drain nobody saw: unknown
    last = unwatched(reference, previous, engine, now)
    return replace(state, phase="serving", checks=checks, judged=last, last_window=last,
                   reference=engine if verified(checks) else reference)


def _on_failure(state: RestoreState, now: float, mono: float, bounds: Bounds) -> RestoreState:
    since = state.unreachable_since if state.unreachable_since is not None else now
    since_mono = state.unreachable_mono if state.unreachable_mono is not None else mono
    state = replace(state, unreachable_since=since, unreachable_mono=since_mono)
    # Unreachable for longer than the down grace: the engine went away (one failed poll, a
    # timeout under load, does not make it so). A duration: measured on the monotonic clock,
    # so a step of the wall clock neither delays nor hastens it; the start shown is wall-clock.
    away = mono - since_mono > bounds.down_grace
    window = state.window
    if window is None:
        if not away or state.outage_aborted:
            return state
        # Nothing seen since this process started: the engine may have gone away long before.
        window = _open(state, since, since_mono, "unreachable", state.last_seen,
                       exact=state.seen_since_start)
    if away and not window.incumbent_gone:
        lost = window.lost if window.lost is not None else window.last_inflight
        window = replace(window, incumbent_gone=True, lost=lost, seen_not_open=True)
    elif away:
        window = replace(window, seen_not_open=True)
    window = replace(window, restored=None, preflight={}, unreachable=True)
    phase: Phase = "restoring" if window.restore_started else "down"
    return replace(state, phase=phase, window=_observed(window, window.record(now, mono)))


def _on_event(state: RestoreState, ev: Event, bounds: Bounds) -> RestoreState:
    # A refused event changes nothing and is not recorded: the same id may be sent again once it
    # can be accepted (exporter/restore/answers.py: every accepted one changes the state).
    if refusal(state, ev.kind) is not None:
        return state
    ids = (*state.event_ids, ev.id)[-MAX_EVENT_IDS:]
    kinds = {i: state.event_kinds[i] for i in ids if i in state.event_kinds}
    state = replace(state, event_ids=ids, event_kinds={**kinds, ev.id: ev.kind})
    window = state.window
    if window is None:  # drain_started (the only event accepted without a window)
        window = replace(_open(state, ev.at, _mono(ev), "event", state.last_seen),
                         unreachable=state.unreachable_since is not None, watched=True)
        return replace(state, phase="down" if window.unreachable else "draining", window=window,
                       outage_aborted=False)
    at = window.record(ev.at, _mono(ev))
    if ev.kind == "abort":
        last = LastWindow(window.start, at, window.cause, "aborted", None, window.start_exact,
                          window.lost, window.incumbent, window.compared_with(), window.restored)
        # The checks of the last closed window stand. Aborted while the engine is unreachable
        # (one that will not come back): this outage opens no new window, whose later start
        # would restart the clock; the next window opens once the engine has answered again
        # (or on drain_started). Aborted while it answers: a new failure streak may open one.
        return replace(state, phase="serving", window=None, last_window=last,
                       unreachable_since=None, unreachable_mono=None,
                       outage_aborted=window.unreachable)
    if ev.kind == "window_closed":
        # The engine answers (an unreachable one is refused): once the incumbent went away,
        # whoever answers now is what the restore produced.
        restored = window.restored or (state.last_seen if window.incumbent_gone else None)
        return _close(state, window, at, bounds, restored)
    # restore_started: progress inside the window (drain_started with a window open is refused).
    phase: Phase = "restoring" if state.phase == "down" else state.phase
    return replace(state, phase=phase, window=replace(window, restore_started=True))


def _on_preflight(state: RestoreState, pf: Preflight, bounds: Bounds) -> RestoreState:
    window = state.window
    if window is None or window.restored is None:
        return state
    window = replace(window, preflight={**window.preflight, pf.probe: pf.ok})
    at = window.record(pf.at, _mono(pf))
    if all(window.preflight.get(p) for p in bounds.preflight):
        return _close(state, window, at, bounds)
    return replace(state, window=_observed(window, at))


def _close(state: RestoreState, window: Window, now: float, bounds: Bounds,
           restored: Engine | None = None) -> RestoreState:
    restored = restored or window.restored
    if not window.incumbent_gone and (window.lost is not None or window.last_inflight is not None):
        if restored is None:
            # Nothing restored: the incumbent serves on, its requests (even those still in flight
            # past the cutoff) were never cut. Lost is what a restore took.
            window = replace(window, lost=0)
        elif window.lost is None:
            window = replace(window, lost=0)  # the incumbent still serves its requests
    outcome, not_before = judge(window, now, restored, bounds)
    compared = window.compared_with()
    last = LastWindow(window.start, now, window.cause, outcome, not_before, window.start_exact,
                      window.lost, window.incumbent, compared, restored, restored is None)
    state = replace(state, phase="serving", window=None, last_window=last,
                    unreachable_since=None, unreachable_mono=None)
    if restored is None:
        # Nothing was restored (the incumbent's own incarnation admits again, or a drain called
        # off was closed by an event): there is nothing to judge, and the last judgment stands,
        # as on abort.
        return state
    if (window.cause == "unreachable" and not window.start_exact and window.incumbent
            and window.incumbent.replaced_by(restored)):
        # The incumbent went away before this sidecar process first looked (no drain seen, no
        # window on file): the new incarnation is an unplanned restart too.
        state = _unplanned(state, now)
    checks = compute_checks(window, restored, bounds)
    reference = restored if verified(checks) else compared
    return replace(state, checks=checks, judged=last, reference=reference or state.reference)
