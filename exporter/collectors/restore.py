"""Restore window, deadlines, phase and post-restore checks (docs/interface.md section 6), e.g.

    helios_restore_window_open 1.0
    helios_restore_window_unknown 0.0
    helios_restore_window_unknown 0.0
    helios_restore_window_start_timestamp_seconds 1.7643895e+09
    helios_restore_deadline_timestamp_seconds{bound="request_cutoff"} 1.7643937e+09
    helios_restore_incumbent_inflight_requests 2.0
    helios_restore_phase{phase="draining"} 1.0
    helios_restore_check_ok{check="container"} 0.0
    helios_restore_last_window_outcome{outcome="unobserved"} 1.0
    helios_restore_last_window_restored 1.0
    helios_restore_last_window_lost_requests 0.0
    helios_engine_unplanned_restarts_total 0.0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter.collectors.families import counter, gauge, zero_filled
from exporter.restore.keeper import EVENT_RESULTS, RestoreView
from exporter.restore.model import LastWindow, RestoreState, Window
from exporter.restore.window import CAUSES, CHECKS, EVENT_KINDS, OUTCOMES, PHASES, Bounds


class RestoreCollector:
    def __init__(self, restore: Callable[[], RestoreView], bounds: Bounds) -> None:
        self._restore = restore
        self._bounds = bounds

    def collect(self) -> Iterator[Metric]:
        status = self._restore()
        known = not status.state_unknown
        if known:
            is_open = gauge("helios_restore_window_open")
            is_open.add_metric([], 1.0 if status.state.window else 0.0)
            yield is_open
        unknown = gauge("helios_restore_window_unknown")
        unknown.add_metric([], 0.0 if known else 1.0)
        yield unknown
        if known:
            yield from self._state(status.state)
        # The state file's own health and the events API: known whatever the file holds.
        for name, value in (
            ("helios_restore_state_write_errors_total", status.write_errors),
            ("helios_restore_state_corrupt_total", status.corrupt_files),
            ("helios_restore_state_read_errors_total", status.read_errors),
        ):
            m = counter(name)
            m.add_metric([], value)
            yield m
        events = counter("helios_restore_events_total")
        closed = [(event, result) for event in EVENT_KINDS for result in EVENT_RESULTS]
        for (event, result), value in zero_filled(closed, status.events):
            events.add_metric([event, result], value)
        yield events

    def _state(self, state: RestoreState) -> Iterator[Metric]:
        """What the state file and this process know of the window, after its `open` gauge.
        Absent, not 0, while the file on disk cannot be read: Prometheus's memory keeps the
        window it saw last, and its deadline pages, instead of resolving them as if no window
        were open."""
        window = state.window
        phase = gauge("helios_restore_phase")
        for p in PHASES:
            phase.add_metric([p], 1.0 if state.phase == p else 0.0)
        yield phase
        if window is not None:
            yield from self._open_window(window)
        if state.checks:
            # Those of the last closed window, kept while a later window is open and after an
            # abort: a failed check stays until a restore is judged again.
            checks = gauge("helios_restore_check_ok")
            for name in CHECKS:
                if name in state.checks:
                    checks.add_metric([name], 1.0 if state.checks[name] else 0.0)
            yield checks
        if state.last_window is not None:
            yield from _last_window(state.last_window)
        restarts = counter("helios_engine_unplanned_restarts_total")
        restarts.add_metric([], state.unplanned_restarts)
        yield restarts

    def _open_window(self, window: Window) -> Iterator[Metric]:
        start = gauge("helios_restore_window_start_timestamp_seconds")
        start.add_metric([], window.start)
        yield start
        deadline = gauge("helios_restore_deadline_timestamp_seconds")
        deadline.add_metric(["request_cutoff"], window.deadline(self._bounds, "request_cutoff"))
        deadline.add_metric(["restore"], window.deadline(self._bounds, "restore"))
        yield deadline
        cause = gauge("helios_restore_window_cause")
        for c in CAUSES:
            cause.add_metric([c], 1.0 if window.cause == c else 0.0)
        yield cause
        inflight = window.incumbent_inflight()
        if inflight is not None:
            g = gauge("helios_restore_incumbent_inflight_requests")
            g.add_metric([], inflight)
            yield g


def _last_window(last: LastWindow) -> Iterator[Metric]:
    if last.start is not None:
        duration = gauge("helios_restore_last_window_duration_seconds")
        duration.add_metric([], last.end - last.start)
        yield duration
        start = gauge("helios_restore_last_window_start_timestamp_seconds")
        start.add_metric([], last.start)
        yield start
    end = gauge("helios_restore_last_window_end_timestamp_seconds")
    end.add_metric([], last.end)
    yield end
    outcome = gauge("helios_restore_last_window_outcome")
    for o in OUTCOMES:
        outcome.add_metric([o], 1.0 if last.outcome == o else 0.0)
    yield outcome
    restored = gauge("helios_restore_last_window_restored")
    restored.add_metric([], 0.0 if last.nothing_restored or last.outcome == "aborted" else 1.0)
    yield restored
    if last.lost is not None:
        lost = gauge("helios_restore_last_window_lost_requests")
        lost.add_metric([], last.lost)
        yield lost
