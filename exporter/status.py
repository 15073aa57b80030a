"""GET /status: the latest view as JSON for on-call, a pure function of (view, bounds, config, now)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from exporter.collectors.registry import Health
from exporter.config import Config
from exporter.cycle.geometry import Geometry
from exporter.cycle.view import View
from exporter.labels import COLLECTOR_SERIES
from exporter.redact import redact_url
from exporter.restore.report import restore_status
from exporter.restore.window import Bounds


def status(view: View, bounds: Bounds, config: Config, now: float, *,
           since_last_cycle: float | None = None,
           collectors: Sequence[Health] | None = None,
           web: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`since_last_cycle`: seconds since the poll loop last completed a cycle, on a monotonic
    clock (None: not known); `collectors`: each collector of /metrics for the published view, as a
    rendering finds it (None: not known);
    `web`: the web configuration in force (`WebConfigState.status()`; None: no
    --web-config-file)."""
    restore = view.restore
    state = restore.state
    snap = view.engine.snapshot
    return {
        "generation": snap.generation if snap else None,
        "generation_derived": snap.generation_derived if snap else None,
        # The current engine's identity (None: no snapshot yet, or the engine sends none).
        "identity": None if snap is None or snap.identity is None else asdict(snap.identity),
        "snapshot_dropped_fields": list(snap.dropped_fields) if snap else [],
        "engine_url": redact_url(config.engine_url),  # as given, the password hidden
        # None until the first snapshot poll finished.
        "engine_up": view.engine.snapshot_current if view.engine.polled else None,
        "pins": [{"pin": c.pin, "expected": c.expected, "found": c.found, "ok": c.ok}
                 for c in view.pins],
        "offload_geometry": _geometry(view.geometry),
        "restore": {
            **restore_status(state, bounds, now, snap, view.sources["engine_snapshot"].last_success),
            "state_file": str(restore.state_file),
            "state_write_errors": restore.write_errors,
            "last_state_write_error": restore.last_write_error or None,
            # Why the state file is held, never written over (unreadable, not a regular file).
            "state_file_held": restore.last_read_error or None,
            # What the file held that this release did not read (a newer release's fields and
            # values: kept, or read as what claims least).
            "state_file_problems": list(restore.state_file_problems),
        },
        "bounds": {"request_cutoff": bounds.request_cutoff,
                   "restore_bound": bounds.restore_bound, "down_grace": bounds.down_grace},
        "sources": {name: h.as_status() for name, h in view.sources.items()},
        "poll_cycles": view.cycles,
        "freshness": _freshness(view, config, now, since_last_cycle),
        "collectors": None if collectors is None else [_collector(h) for h in collectors],
        "web": None if web is None else dict(web),
    }


def _freshness(view: View, config: Config, now: float,
               since_last_cycle: float | None) -> dict[str, Any]:
    """How old the published view is, and whether /healthz calls the loop stale."""
    stale = None if since_last_cycle is None else since_last_cycle > config.stale_after
    return {
        "polled_at": view.polled_at,  # when the latest view's cycle began polling (unix s)
        "view_age_seconds": None if view.polled_at is None else max(0.0, now - view.polled_at),
        "seconds_since_last_poll_cycle": since_last_cycle,
        "stale_after_seconds": config.stale_after,
        "stale": stale,
    }


def _collector(h: Health) -> dict[str, Any]:
    """One collector of /metrics; a failing one with what is missing from /metrics meanwhile."""
    missing = None if h.ok else COLLECTOR_SERIES.get(h.collector, "its series").replace(
        "(for {memory})", "(for as long as the alerts' window memory)")
    return {"collector": h.collector, "ok": h.ok, "cause": h.cause, "missing": missing}


def _geometry(checked: Geometry | None) -> dict[str, Any] | None:
    """The geometry rules of the last good snapshot's offload section (exporter/cycle/geometry.py);
    the layout rule with the layout's name and the record bytes expected and found."""
    if checked is None:
        return None
    rules = []
    for r in checked.rules:
        rule: dict[str, Any] = {"rule": r.rule, "ok": r.ok, "value": r.value, "limit": r.limit,
                                "detail": r.detail}
        if r.layout is not None:
            rule.update(layout=r.layout, expected=dict(r.expected or {}),
                        found=dict(r.found or {}))
        rules.append(rule)
    return {"consistent": checked.consistent, "failed": [r.rule for r in checked.failed],
            "rules": rules}
