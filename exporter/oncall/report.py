"""The on-call report: what `/status` says, in the order a person paged at 3 a.m. needs it.

`build(status, now)` is a pure function of the `/status` dict and the time the report is for
(the sidecar's clock). Summary first, then what to do, then the window, checks, engine, pins,
sources and the last window. Sections of a newer `/status` (pins, geometry, the v2 restore fields)
are shown when present and said to be unknown when not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exporter.defaults import RESTART_RECENT
from exporter.oncall import health, parts
from exporter.oncall.model import (
    FAILED,
    OK,
    UNKNOWN,
    At,
    Block,
    Cell,
    Code,
    Fields,
    Link,
    Report,
    Section,
    Since,
    Steps,
    Tone,
    Until,
    Word,
)
from exporter.oncall.read import code, field, mapping, number, passed, text

RUNBOOKS = "docs/runbooks"
ENGINE_SOURCES = ("engine_snapshot", "engine_metrics")


def build(status: Mapping[str, Any], now: float) -> Report:
    restore = mapping(status.get("restore"))
    window = field(restore, "window")
    window = window if isinstance(window, Mapping) else None
    checks = parts.check_rows(restore)
    pins = parts.pin_rows(status)
    rules = parts.geometry_rows(status)
    sources = parts.source_rows(status, now)
    summary: list[tuple[Tone, Cell]] = []
    if window is not None:
        summary.extend(_window_summary(window, restore, now))
    else:
        phase = restore.get("phase")
        summary.append(("good", (OK, "no restore window open; phase", code(phase))))
        if restore.get("outage_aborted") is True:
            summary.append(("warn", (Word("aborted", "warn"), "the window of this outage was "
                                     "aborted: none opens until the engine answers again")))
    restarted = _recent_restart(restore, now)
    if restarted is not None:
        summary.append(("warn", (Word("restarted", "warn"), "the engine came back as a new "
                                 "incarnation outside a restore window at", At(restarted), "(",
                                 Since(now - restarted), ")")))
    last = field(restore, "last_window")
    outcome = field(last, "outcome")
    if window is None and outcome == "late":
        summary.append(("bad", (Word("late", "bad"), "the last restore window ended after its "
                                "restore deadline, at", *_end(last))))
    elif window is None and outcome == "unobserved":
        summary.append(("warn", (Word("unobserved", "warn"), "the engine was restored while the "
                                 "sidecar was down; found at", *_end(last))))
    failed = [r for r in checks if r.result is FAILED]
    for row in failed:
        summary.append(("bad", (FAILED, "post-restore check", Code(row.name), *row.why())))
    if checks and not failed and all(r.result is OK for r in checks):
        summary.append(("good", (OK, "post-restore checks of the last restore passed")))
    engine_down = status.get("engine_up") is False
    if engine_down and window is not None:
        # Expected while it is being restored: the window's deadlines are what matter then.
        summary.append(("warn", (Word("down", "warn"), "the engine does not answer its snapshot"
                                 " endpoint (expected while it is restored)")))
    elif engine_down:
        summary.append(("bad", (FAILED, "the engine does not answer its snapshot endpoint")))
    for pin in pins:
        if pin.result is FAILED:
            summary.append(("bad", (FAILED, "pin", Code(pin.name), "expected", *pin.expected,
                                    "found", *pin.found)))
    for rule in rules:
        if rule.result is FAILED:
            summary.append(("bad", (FAILED, "offload geometry", Code(rule.name),
                                    *(rule.why() or rule.detail))))
    for src in sources:
        # With the engine down, its two sources failing says nothing more.
        if src.result is FAILED and not (engine_down and src.name in ENGINE_SOURCES):
            summary.append(("bad", (FAILED, "source", Code(src.name), *src.error)))
    failing = health.failing_collectors(status) or []
    for collector in failing:
        summary.append(("bad", (FAILED, "collector", Code(collector.name), "raised",
                                code(collector.cause), "; missing from /metrics:",
                                text(collector.missing))))
    for cert in health.certificates(status):
        if cert.tone(now) in ("bad", "warn"):
            summary.append((cert.tone(now), (cert.word(now), "the", cert.label, "of the web "
                                             "configuration:", *cert.when(now))))
    tones = {tone for tone, _ in summary}
    tone: Tone = "bad" if "bad" in tones else "warn" if "warn" in tones else "good"
    engine_url = status.get("engine_url")
    return Report(
        engine_url=engine_url if isinstance(engine_url, str) else None,
        as_of=now,
        tone=tone,
        summary=tuple(cell for _, cell in summary),
        window_open=window is not None,
        sections=(
            Section("next", "What to do next", (Steps(tuple(_next_steps(
                status, window, now, bool(failed), pins, rules, sources))),)),
            Section("window", "Restore window", _window_blocks(restore, window, status, now)),
            Section("checks", "Post-restore checks", parts.checks_blocks(restore, checks)),
            Section("engine", "Engine", (_engine_fields(status, restore, now),)),
            Section("pins", "Pins and offload geometry", parts.pins_blocks(status, pins, rules)),
            Section("sources", "Sources", (parts.sources_table(sources),)),
            Section("last-window", "Last window", parts.last_window_blocks(restore)),
            Section("sidecar", "Sidecar", (_sidecar_fields(status, restore, now),
                                           *((health.collectors_table(failing),) if failing
                                             else ()))),
        ),
    )


# -- summary ------------------------------------------------------------------------------------
def _recent_restart(restore: Mapping[str, Any], now: float) -> float | None:
    """When the last unplanned restart was seen, if recent (HeliosEngineRestartedOutsideWindow
    fires as long)."""
    at = number(restore.get("last_unplanned_restart"))
    return at if at is not None and now - at < RESTART_RECENT else None


def _end(last: Any) -> Cell:
    end = number(field(last, "end"))
    return (UNKNOWN,) if end is None else (At(end),)


def _deadline(window: Mapping[str, Any], name: str, now: float) -> tuple[float | None, float | None]:
    """(deadline, seconds left) of `request_cutoff` or `restore`, from whatever /status gives."""
    at = number(window.get(f"{name}_deadline"))
    left = number(window.get(f"seconds_to_{'restore_deadline' if name == 'restore' else name}"))
    if left is None and at is not None:
        left = at - now
    return at, left


def _window_summary(window: Mapping[str, Any], restore: Mapping[str, Any],
                    now: float) -> list[tuple[Tone, Cell]]:
    start = number(window.get("start"))
    opened: Cell = ("since", At(start), "(", Since(now - start), ")") if start else ()
    inflight = _incumbent_inflight(window)
    draining: Cell = (f"; {inflight:g} requests in flight",) if inflight else ()
    lines: list[tuple[Tone, Cell]] = [("warn", (Word("RESTORE WINDOW OPEN", "warn"), "phase",
                                                code(restore.get("phase")), *opened, *draining))]
    for name, label in (("request_cutoff", "request cutoff"), ("restore", "restore deadline")):
        at, left = _deadline(window, name, now)
        if at is None or left is None:
            lines.append(("warn", (UNKNOWN, label)))
            continue
        if left >= 0:
            lines.append(("warn", (label, At(at), ",", Until(left))))
        elif name == "request_cutoff" and not inflight:
            # As HeliosRequestCutoffBreached: past the cutoff is a failure only while the
            # incumbent still has requests in flight (lost ones are under lost requests).
            lines.append(("warn", (label, At(at), ",", Until(left),
                                   "; the incumbent has no request in flight")))
        else:
            lines.append(("bad", (Word("PASSED", "bad"), label, At(at), ",", Until(left))))
    return lines


def _incumbent_inflight(window: Mapping[str, Any]) -> float | None:
    return number(window.get("incumbent_inflight_requests", window.get("last_inflight")))


# -- what to do next ----------------------------------------------------------------------------
def _runbook(alert: str) -> Code:
    return Code(f"{RUNBOOKS}/{alert}.md")


def _next_steps(status: Mapping[str, Any], window: Mapping[str, Any] | None, now: float,
                failed_checks: bool, pins: list[parts.Row], rules: list[parts.Row],
                sources: list[parts.Row]) -> list[Cell]:
    steps: list[Cell] = []
    if window is not None:
        _, cutoff_left = _deadline(window, "request_cutoff", now)
        _, restore_left = _deadline(window, "restore", now)
        if restore_left is not None and restore_left < 0:
            steps.append(("The restore deadline has passed: escalate now, see",
                          _runbook("HeliosRestoreBoundBreached")))
        inflight = _incumbent_inflight(window)
        if cutoff_left is not None and cutoff_left < 0 and inflight:
            steps.append(("Requests are still in flight past the request cutoff, see",
                          _runbook("HeliosRequestCutoffBreached")))
        steps.append(("Follow the restore checklist in", _runbook("HeliosRestoreWindowOpen"),
                      "; the window closes when the restored engine admits requests again"))
    if failed_checks:
        steps.append(("A post-restore check failed: compare expected and found under",
                      Link("Post-restore checks", "#checks"), "and see",
                      _runbook("HeliosRestoreCheckFailed")))
    if any(p.result is FAILED for p in pins):
        steps.append(("The engine does not match a pin: compare expected and found under",
                      Link("Pins", "#pins"), "and see", _runbook("HeliosEnginePinMismatch")))
    failed_rules = {r.name for r in rules if r.result is FAILED}
    if failed_rules - {"record_bytes_match_layout"}:
        steps.append(("The offload snapshot's arithmetic does not hold (the failed rule is under",
                      Link("Pins and offload geometry", "#pins"), "); see",
                      _runbook("HeliosOffloadGeometryInconsistent")))
    if "record_bytes_match_layout" in failed_rules:
        steps.append(("The engine's offload records are not those of the pinned model layout: "
                      "compare expected and found under", Link("Pins and offload geometry", "#pins"),
                      "and see", _runbook("HeliosOffloadGeometryInconsistent")))
    restore = mapping(status.get("restore"))
    if _recent_restart(restore, now) is not None:
        steps.append(("The engine restarted outside a restore window: runs across it are "
                      "invalid; find why, see", _runbook("HeliosEngineRestartedOutsideWindow")))
    down = {s.name for s in sources if s.result is FAILED}
    if window is None and ("engine_snapshot" in down or status.get("engine_up") is False):
        steps.append(("The engine's snapshot fails, see", _runbook("HeliosEngineSnapshotFailing")))
    if "nvml" in down:
        steps.append(("NVML does not answer, see", _runbook("HeliosGpuLost")))
    if health.failing_collectors(status):
        steps.append(("A collector of /metrics fails: its series are missing (listed under",
                      Link("Sidecar", "#sidecar"), "); see",
                      _runbook("HeliosExporterCollectorFailing")))
    tones = {cert.tone(now) for cert in health.certificates(status)}
    if tones & {"bad", "warn"}:
        alert = ("HeliosExporterCertificateExpiryImminent" if "bad" in tones
                 else "HeliosExporterCertificateExpiring")
        steps.append(("A certificate of the web configuration expires soon (under",
                      Link("Sidecar", "#sidecar"), "): renew it, see", _runbook(alert)))
    if not steps:
        steps.append(("Nothing to do. Every alert has a runbook under", Code(f"{RUNBOOKS}/"),
                      "; the raw data is at", Link("/status", "status")))
    else:
        steps.append(("The raw data behind this page:", Link("/status", "status")))
    return steps


# -- sections -----------------------------------------------------------------------------------
def _window_blocks(restore: Mapping[str, Any], window: Mapping[str, Any] | None,
                   status: Mapping[str, Any], now: float) -> tuple[Block, ...]:
    bounds = mapping(status.get("bounds"))
    admission = field(restore, "admission")
    rows: list[tuple[str, Cell]] = [("phase", (code(restore.get("phase")),))]
    if isinstance(admission, Mapping):
        rows.append(("engine admission", parts.admission_cell(admission)))
    if window is None:
        cutoff, bound = number(bounds.get("request_cutoff")), number(bounds.get("restore_bound"))
        rows.append(("window", ("none open",)))
        if "outage_aborted" in restore:
            rows.append(("outage aborted", (
                (Word("yes", "warn"), "(an abort discarded this outage's window: none opens "
                 "until the engine answers, or on drain_started)")
                if restore.get("outage_aborted") is True else ("no",))))
        if cutoff is not None and bound is not None:
            rows.append(("when one opens", (
                f"request cutoff {parts.minutes(cutoff)} after its start, restore deadline "
                f"{parts.minutes(bound)} after its start",)))
        return (Fields(tuple(rows)),)
    start = number(window.get("start"))
    rows.append(("window", (Word("OPEN", "warn"), "cause", code(window.get("cause")))))
    start_cell: Cell = (UNKNOWN,) if start is None else (At(start), "(", Since(now - start), ")")
    if window.get("start_exact") is False:
        start_cell = (*start_cell, "(first seen after the sidecar started: may be earlier)")
    rows.append(("start", start_cell))
    for name, label in (("request_cutoff", "request cutoff"), ("restore", "restore deadline")):
        at, left = _deadline(window, name, now)
        rows.append((label, (UNKNOWN,) if at is None or left is None else
                     (At(at), ",", Until(left))))
    for key, label in (("incumbent_inflight_requests", "incumbent in-flight requests"),
                       ("last_inflight", "in-flight as last seen"),
                       ("lost_requests", "lost requests"), ("drained", "drained"),
                       ("incumbent_gone", "incumbent gone"),
                       ("engine_unreachable", "engine unreachable"),
                       ("restore_started", "restore started (event)")):
        if key == "lost_requests" and key in window and window[key] is None:
            rows.append((label, ("none so far",)))  # None while open: nothing lost yet
        elif key in window:
            rows.append((label, (text(window.get(key)),)))
    preflight = mapping(window.get("preflight"))
    if preflight:
        rows.append(("preflight", tuple(p for name, ok in sorted(preflight.items())
                                        for p in (Code(str(name)), passed(ok)))))
    engines = parts.engines_table("Engines in this window", window)
    return (Fields(tuple(rows)), engines)


def _engine_fields(status: Mapping[str, Any], restore: Mapping[str, Any],
                   now: float) -> Fields:
    identity = status.get("identity")
    generation: Cell = (code(status.get("generation")),)
    if status.get("generation_derived") is True:
        generation = (*generation, "(derived by the sidecar: the engine sends none)")
    up = status.get("engine_up")
    rows: list[tuple[str, Cell]] = [
        ("snapshot", (passed(up), "answering" if up else "not answering; below, the last good"
                      " snapshot" if up is False else "")),
        ("generation", generation),
    ]
    if isinstance(identity, Mapping):
        for key, label in parts.IDENTITY:
            rows.append((label, (code(identity.get(key)),)))
    else:
        last = field(restore, "last_verified_engine")
        rows.append(("identity", (UNKNOWN, "(this sidecar's /status does not report it)")
                     if not isinstance(last, Mapping) else
                     ("see the last verified engine under", Link("Last window", "#last-window"))))
    restarts = number(restore.get("unplanned_restarts"))
    if restarts is not None:
        last = number(restore.get("last_unplanned_restart"))
        rows.append(("unplanned restarts", (
            f"{restarts:g}", *(("; the last at", At(last), "(", Since(now - last), ")")
                               if last is not None else ()),
            "(new incarnations no restore window saw coming)")))
    dropped = status.get("snapshot_dropped_fields")
    if isinstance(dropped, list) and dropped:
        rows.append(("fields dropped", (Word("dropped", "warn"),
                                        *(Code(str(d)) for d in dropped),
                                        "(not valid label values)")))
    rows.extend(_kind_rows(status.get("engine_kind")))
    rows.append(("engine URL", (code(status.get("engine_url")),)))
    return Fields(tuple(rows))


def _kind_rows(kind: Any) -> list[tuple[str, Cell]]:
    """--engine-kind other than helios (docs/engines.md): what the engine is read as, what it
    does not supply, and what stays unknown without a snapshot."""
    if not isinstance(kind, Mapping):
        return []
    rows: list[tuple[str, Cell]] = [("engine kind", (
        code(kind.get("kind") or "deciding"), f"({kind.get('decided') or 'auto'}; mapping",
        code(kind.get("mapping")), ")"))]
    mismatch = kind.get("mismatch")
    if isinstance(mismatch, Mapping):
        rows.append(("kind mismatch", (Word("mismatch", "bad"), str(mismatch.get("message")))))
    absent = kind.get("absent")
    if isinstance(absent, list) and absent:
        rows.append(("not exported", (*(Code(str(s)) for s in absent),
                                      "(absent from /metrics: docs/engines.md)")))
    unknown = kind.get("unknown")
    if isinstance(unknown, list) and unknown:
        rows.append(("unknown", (UNKNOWN, ", ".join(map(str, unknown)),
                                 "(need the engine's snapshot; never shown as passing)")))
    return rows


def _sidecar_fields(status: Mapping[str, Any], restore: Mapping[str, Any], now: float) -> Fields:
    errors = number(restore.get("state_write_errors"))
    write: Cell = (UNKNOWN,) if errors is None else (OK,) if errors == 0 else (
        FAILED, f"{errors:g} failed writes; last:", text(restore.get("last_state_write_error")))
    return Fields((
        ("state file", (code(restore.get("state_file")),)),
        ("state writes", write),
        ("poll cycles", (text(status.get("poll_cycles")),)),
        ("collectors", health.collectors_cell(status)),
        *health.web_rows(status, now),
    ))

