"""Restore window, deadlines, phase and post-restore checks (docs/interface.md section 6), e.g.

    helios_restore_window_open 1.0
    helios_restore_window_start_timestamp_seconds 1.7643895e+09
    helios_restore_deadline_timestamp_seconds{bound="request_cutoff"} 1.7643937e+09
    helios_restore_phase{phase="drained"} 1.0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter.collectors.families import counter, gauge, zero_filled
from exporter.restore.keeper import EVENT_RESULTS, RestoreView
from exporter.restore.window import CAUSES, CHECKS, EVENT_KINDS, OUTCOMES, PHASES, Bounds


class RestoreCollector:
    def __init__(self, restore: Callable[[], RestoreView], bounds: Bounds) -> None:
        self._restore = restore
        self._bounds = bounds

    def collect(self) -> Iterator[Metric]:
        status = self._restore()
        state = status.state
        window = state.window
        is_open = gauge("helios_restore_window_open",
                        "1 while a restore window is open (drain, event or engine unreachable).")
        is_open.add_metric([], 1.0 if window else 0.0)
        yield is_open
        phase = gauge("helios_restore_phase", "Restore state machine phase, one-hot.", ["phase"])
        for p in PHASES:
            phase.add_metric([p], 1.0 if state.phase == p else 0.0)
        yield phase
        if window is not None:
            start = gauge("helios_restore_window_start_timestamp_seconds",
                          "Start of the open restore window (unix seconds).")
            start.add_metric([], window.start)
            yield start
            deadline = gauge("helios_restore_deadline_timestamp_seconds",
                             "Deadlines of the open window: start + request cutoff, start + "
                             "restore bound (unix seconds).", ["bound"])
            deadline.add_metric(["request_cutoff"], window.deadline(self._bounds, "request_cutoff"))
            deadline.add_metric(["restore"], window.deadline(self._bounds, "restore"))
            yield deadline
            cause = gauge("helios_restore_window_cause", "What opened the window, one-hot.",
                          ["cause"])
            for c in CAUSES:
                cause.add_metric([c], 1.0 if window.cause == c else 0.0)
            yield cause
        elif state.checks:
            checks = gauge("helios_restore_check_ok",
                           "Post-restore checks of the last closed window: 1 passed, 0 failed; a "
                           "check whose inputs were unknown is absent.", ["check"])
            for name in CHECKS:
                if name in state.checks:
                    checks.add_metric([name], 1.0 if state.checks[name] else 0.0)
            yield checks
        if state.last_window is not None:
            last = state.last_window
            duration = gauge("helios_restore_last_window_duration_seconds",
                             "Duration of the last closed or aborted restore window.")
            duration.add_metric([], last.end - last.start)
            yield duration
            outcome = gauge("helios_restore_last_window_outcome",
                            "Outcome of the last window, one-hot: in_time, late or aborted.",
                            ["outcome"])
            for o in OUTCOMES:
                outcome.add_metric([o], 1.0 if last.outcome == o else 0.0)
            yield outcome
        for name, value, doc in (
            ("helios_restore_state_write_errors_total", status.write_errors,
             "Failed writes of the restore state file (disk full, read-only...)."),
            ("helios_restore_state_corrupt_total", status.corrupt_files,
             "State files found unusable at start and moved aside."),
            ("helios_restore_state_read_errors_total", status.read_errors,
             "State files that could not be read at start (I/O error; left in place)."),
        ):
            m = counter(name, doc)
            m.add_metric([], value)
            yield m
        events = counter("helios_restore_events_total",
                         "Events received on POST /restore/events by event and result.",
                         ["event", "result"])
        closed = [(event, result) for event in EVENT_KINDS for result in EVENT_RESULTS]
        for (event, result), value in zero_filled(closed, status.events):
            events.add_metric([event, result], value)
        yield events
