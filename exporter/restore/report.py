"""The restore part of `/status`: a pure function of the state, the bounds, the last good
snapshot and the time, answering what the runbooks ask (docs/restore.md, "Reading /status").
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from exporter.restore.checks import reasons
from exporter.restore.model import Bounds, Engine, LastWindow, RestoreState, Window
from exporter.snapshot.model import Snapshot


def _engine(engine: Engine | None) -> dict[str, Any] | None:
    return None if engine is None else asdict(engine)


def _age(at: float | None, now: float) -> float | None:
    return None if at is None else round(max(0.0, now - at), 3)


def admission(snapshot: Snapshot | None, seen_at: float | None, now: float) -> dict[str, Any]:
    """The engine's admission as last seen, and how old that sighting is."""
    adm = snapshot.admission if snapshot is not None else None
    return {
        "state": adm.state if adm else None,
        "inflight_requests": adm.inflight_requests if adm else None,
        "generation": snapshot.generation if snapshot else None,
        "seen_at": seen_at,
        "age_seconds": _age(seen_at, now),
    }


def window_status(window: Window, bounds: Bounds, now: float) -> dict[str, Any]:
    cutoff, restore = window.deadline(bounds, "request_cutoff"), window.deadline(bounds, "restore")
    return {
        "start": window.start,
        # False: opened on the sidecar's first look after it started; the engine may have
        # gone away earlier, so the outcome can be late or unobserved, never in_time.
        "start_exact": window.start_exact,
        "cause": window.cause,
        "request_cutoff_deadline": cutoff,
        "restore_deadline": restore,
        "seconds_to_request_cutoff": round(cutoff - now, 3),
        "seconds_to_restore_deadline": round(restore - now, 3),
        "incumbent_inflight_requests": window.incumbent_inflight(),
        "last_inflight": window.last_inflight,  # the incumbent's, as last seen while it was up
        "incumbent_gone": window.incumbent_gone,
        "lost_requests": window.lost,
        "drained": window.drained,
        "engine_unreachable": window.unreachable,
        "restore_started": window.restore_started,
        "last_seen_unrestored": window.last_unrestored,
        "incumbent": _engine(window.incumbent),
        "reference": _engine(window.compared_with()),
        "restored": _engine(window.restored),
        "preflight": dict(window.preflight),
    }


def _reason(last: LastWindow) -> str | None:
    """Why the last window judged no check (None: it judged them)."""
    if last.outcome == "aborted":
        return "aborted: no check was judged; the checks of an earlier window stand"
    if not last.nothing_restored:
        return None
    if last.incumbent is None:
        return "nothing restored: no engine was seen in this window; no check was judged"
    return (f"nothing restored: the incumbent's own incarnation (generation "
            f"{last.incumbent.generation}) admitted again, so it never restarted; no check was "
            "judged and the checks of an earlier window stand")


def last_window_status(last: LastWindow) -> dict[str, Any]:
    return {
        "start": last.start,
        "end": last.end,
        "duration_seconds": None if last.start is None else round(last.end - last.start, 3),
        "cause": last.cause,
        "outcome": last.outcome,
        # The restore completed after not_before and at or before not_after (the time of
        # record); equal when the sidecar watched it.
        "evidence": {"not_before": last.not_before, "not_after": last.end,
                     "start_exact": last.start_exact},
        "lost_requests": last.lost,
        "incumbent": _engine(last.incumbent),
        "reference": _engine(last.reference),
        "restored": _engine(last.restored),
        "nothing_restored": last.nothing_restored,
        "reason": _reason(last),  # why no check was judged at its end; None: they were
    }


def restore_status(state: RestoreState, bounds: Bounds, now: float,
                   snapshot: Snapshot | None = None,
                   snapshot_at: float | None = None) -> dict[str, Any]:
    judged = state.judged
    return {
        "phase": state.phase,
        "window_open": state.window is not None,
        "admission": admission(snapshot, snapshot_at, now),
        "window": None if state.window is None else window_status(state.window, bounds, now),
        "checks": dict(state.checks),
        "failed_checks": reasons(state.checks, judged),
        # Which window the checks judged: the last closed one, not an abort after it.
        "checks_window": None if judged is None else {
            "start": judged.start, "end": judged.end, "outcome": judged.outcome},
        "last_window": None if state.last_window is None else last_window_status(state.last_window),
        "last_verified_engine": _engine(state.reference),
        "unplanned_restarts": state.unplanned_restarts,
        "last_unplanned_restart": state.last_unplanned_restart,
        # An abort discarded the window of this outage: no window opens until the engine answers.
        "outage_aborted": state.outage_aborted,
    }
