"""The restore window as a pure state machine (docs/interface.md section 6).

`step(state, input, config)` returns the next `RestoreState`; it reads no clock and does no I/O,
so every transition is unit-tested with plain numbers and the restore keeper persists whatever comes out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final, Literal

from exporter.defaults import DOWN_GRACE, REQUEST_CUTOFF, RESTORE_BOUND
from exporter.snapshot import Snapshot

Phase = Literal["serving", "draining", "drained", "down", "restoring", "verifying"]
Cause = Literal["drain", "event", "unreachable"]
EventKind = Literal["drain_started", "restore_started", "window_closed", "abort"]
Outcome = Literal["in_time", "late", "aborted"]

PHASES: Final = ("serving", "draining", "drained", "down", "restoring", "verifying")
CAUSES: Final = ("drain", "event", "unreachable")
CHECKS: Final = (
    "image",
    "container",
    "fresh_generation",
    "drained_admission",
    "preflight_direct",
    "preflight_routed",
)
OUTCOMES: Final = ("in_time", "late", "aborted")
EVENT_KINDS: Final = ("drain_started", "restore_started", "window_closed", "abort")
MAX_EVENT_IDS: Final = 1000


@dataclass(frozen=True, slots=True)
class Bounds:
    request_cutoff: float = REQUEST_CUTOFF
    restore_bound: float = RESTORE_BOUND
    down_grace: float = DOWN_GRACE
    preflight: tuple[str, ...] = ()  # configured probes: "direct", "routed"


@dataclass(frozen=True, slots=True)
class Engine:
    """Who an engine incarnation is: what the checks compare."""

    generation: str
    image_digest: str | None = None
    container_id: str | None = None

    @classmethod
    def of(cls, snap: Snapshot) -> Engine:
        ident = snap.identity
        return cls(
            snap.generation,
            None if ident is None else ident.image_digest,
            None if ident is None else ident.container_id,
        )


@dataclass(frozen=True, slots=True)
class Window:
    start: float
    cause: Cause
    incumbent: Engine | None
    last_inflight: int | None = None
    drained: bool = False  # in-flight reached 0, admission not open, before the cutoff
    seen_not_open: bool = False  # engine seen draining, closed or unreachable in this window
    restored: Engine | None = None  # engine answering with admission open again
    preflight: dict[str, bool] = field(default_factory=dict)
    restore_started: bool = False
    went_away: bool = False  # the engine was unreachable at some point in this window

    def deadline(self, bounds: Bounds, bound: Literal["request_cutoff", "restore"]) -> float:
        return self.start + (bounds.request_cutoff if bound == "request_cutoff" else bounds.restore_bound)


@dataclass(frozen=True, slots=True)
class LastWindow:
    start: float
    end: float
    cause: Cause
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class RestoreState:
    phase: Phase = "serving"
    window: Window | None = None
    last_seen: Engine | None = None  # last engine seen serving outside a window
    last_inflight: int | None = None
    unreachable_since: float | None = None  # first failed poll of the current failure streak
    checks: dict[str, bool] = field(default_factory=dict)  # of the last closed window
    last_window: LastWindow | None = None
    event_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Poll:
    at: float
    snapshot: Snapshot | None  # None: refused, timed out, or no valid snapshot


@dataclass(frozen=True, slots=True)
class Event:
    at: float
    id: str
    kind: EventKind


@dataclass(frozen=True, slots=True)
class Preflight:
    at: float
    probe: str  # "direct" | "routed"
    ok: bool


Input = Poll | Event | Preflight


def is_duplicate(state: RestoreState, event_id: str) -> bool:
    return event_id in state.event_ids


def step(state: RestoreState, inp: Input, bounds: Bounds) -> RestoreState:
    if isinstance(inp, Event):
        return _on_event(state, inp, bounds)
    if isinstance(inp, Preflight):
        return _on_preflight(state, inp, bounds)
    if inp.snapshot is None:
        return _on_failure(state, inp.at, bounds)
    return _on_snapshot(state, inp.snapshot, inp.at, bounds)


def _open(state: RestoreState, start: float, cause: Cause, incumbent: Engine | None) -> Window:
    return Window(start=start, cause=cause, incumbent=incumbent, last_inflight=state.last_inflight)


def _on_snapshot(state: RestoreState, snap: Snapshot, now: float, bounds: Bounds) -> RestoreState:
    engine = Engine.of(snap)
    if snap.admission is None:
        # An engine that reports no admission section says neither that it drains nor that it
        # admits again: it is reachable, nothing more (a window is closed by an event then).
        state = replace(state, unreachable_since=None)
        if state.window is None:
            return replace(state, phase="serving", last_seen=engine)
        return state
    admission = snap.admission.state
    inflight = snap.admission.inflight_requests
    state = replace(state, unreachable_since=None, last_inflight=inflight)
    window = state.window
    if window is None:
        if admission == "open":
            return replace(state, phase="serving", last_seen=engine)
        # The engine itself says it is draining or closed: the window opens now.
        window = _open(state, now, "drain", engine)
    if window.incumbent is not None:
        is_incumbent = engine.generation == window.incumbent.generation
    else:
        # No incumbent known (fresh sidecar): the first engine seen is it, unless the engine has
        # gone away since the window opened; then whoever answers may already be the restored one.
        is_incumbent = not window.seen_not_open
    adopted = window.incumbent or (engine if is_incumbent else None)
    if admission != "open":
        # Drained counts only before the engine went away and before the request cutoff.
        drained = window.drained or (
            inflight == 0
            and is_incumbent
            and not window.went_away
            and now <= window.deadline(bounds, "request_cutoff")
        )
        window = replace(
            window,
            last_inflight=inflight if is_incumbent else window.last_inflight,
            drained=drained,
            seen_not_open=True,
            incumbent=adopted,
        )
        if not is_incumbent:
            phase: Phase = "restoring"
        else:
            phase = "drained" if inflight == 0 else "draining"
        return replace(state, phase=phase, window=window)
    # Admission open.
    if not window.seen_not_open and is_incumbent:
        # A window opened by an event waits until the engine is seen going away.
        window = replace(window, last_inflight=inflight, incumbent=adopted)
        return replace(state, phase="draining", window=window)
    window = replace(window, restored=engine)
    if all(window.preflight.get(p) for p in bounds.preflight):
        return _close(state, window, now, bounds, engine)
    return replace(state, phase="verifying", window=window)


def _on_failure(state: RestoreState, now: float, bounds: Bounds) -> RestoreState:
    since = state.unreachable_since if state.unreachable_since is not None else now
    state = replace(state, unreachable_since=since)
    window = state.window
    if window is None:
        if now - since <= bounds.down_grace:
            return state
        window = _open(state, since, "unreachable", state.last_seen)
    window = replace(window, seen_not_open=True, went_away=True, restored=None, preflight={})
    phase: Phase = "restoring" if window.restore_started else "down"
    return replace(state, phase=phase, window=window)


def _on_event(state: RestoreState, ev: Event, bounds: Bounds) -> RestoreState:
    ids = (*state.event_ids, ev.id)[-MAX_EVENT_IDS:]
    state = replace(state, event_ids=ids)
    window = state.window
    if ev.kind == "abort":
        if window is None:
            return state
        last = LastWindow(window.start, ev.at, window.cause, "aborted")
        # A new failure streak, not the one before the abort, may open the next window.
        return replace(state, phase="serving", window=None, last_window=last, checks={},
                       unreachable_since=None)
    if ev.kind == "window_closed":
        if window is None:
            return state
        return _close(state, window, ev.at, bounds, window.restored)
    if ev.kind == "restore_started":
        # Only drain_started, a draining/closed engine or unreachability open a window
        # (docs/interface.md section 6); restore_started marks progress inside one.
        if window is None:
            return state
        phase: Phase = "restoring" if state.phase == "down" else state.phase
        return replace(state, phase=phase, window=replace(window, restore_started=True))
    if window is None:  # drain_started
        return replace(state, phase="draining", window=_open(state, ev.at, "event", state.last_seen))
    return state


def _on_preflight(state: RestoreState, pf: Preflight, bounds: Bounds) -> RestoreState:
    window = state.window
    if window is None or window.restored is None:
        return state
    window = replace(window, preflight={**window.preflight, pf.probe: pf.ok})
    if all(window.preflight.get(p) for p in bounds.preflight):
        return _close(state, window, pf.at, bounds, window.restored)
    return replace(state, window=window)


def _close(
    state: RestoreState, window: Window, now: float, bounds: Bounds, restored: Engine | None
) -> RestoreState:
    checks = compute_checks(window, restored, bounds)
    outcome: Outcome = "in_time" if now <= window.deadline(bounds, "restore") else "late"
    last = LastWindow(window.start, now, window.cause, outcome)
    return replace(
        state,
        phase="serving",
        window=None,
        checks=checks,
        last_window=last,
        last_seen=restored or state.last_seen,
        unreachable_since=None,  # closed by an event while unreachable: a new streak starts
    )


def compute_checks(window: Window, restored: Engine | None, bounds: Bounds) -> dict[str, bool]:
    """Incumbent versus restored engine; a check whose inputs are unknown is left out."""
    checks: dict[str, bool] = {}
    inc = window.incumbent
    if inc is not None and restored is not None:
        if inc.image_digest is not None and restored.image_digest is not None:
            checks["image"] = inc.image_digest == restored.image_digest
        if inc.container_id is not None and restored.container_id is not None:
            checks["container"] = inc.container_id == restored.container_id
        checks["fresh_generation"] = inc.generation != restored.generation
    if window.drained:
        checks["drained_admission"] = True
    elif window.last_inflight is not None:  # never knew the incumbent's in-flight: unknown
        checks["drained_admission"] = False
    for probe in bounds.preflight:
        if probe in window.preflight:
            checks[f"preflight_{probe}"] = window.preflight[probe]
        elif restored is not None:
            checks[f"preflight_{probe}"] = False
    return checks
