"""The demo's narration: one line per thing that happened, stamped with the seconds since the
simulated engine started. The restore story comes from the sidecar's `/status`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

INDENT = " " * 19  # continuation lines start under the text of the line above

Clock = Callable[[], float]


class Stamp:
    """`[+ 12.3s] topic    ` prefixes, relative to the moment the story started."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.t0 = clock()

    def __call__(self, topic: str, text: str) -> str:
        return f"[+{self.clock() - self.t0:5.1f}s] {topic:<8} {text}"


def _seconds(value: float) -> str:
    return f"in {value:.0f}s" if value >= 0 else f"passed {-value:.0f}s ago"


def _window(window: dict[str, Any]) -> str:
    return (f"request cutoff {_seconds(window['seconds_to_request_cutoff'])}, restore deadline "
            f"{_seconds(window['seconds_to_restore_deadline'])}; incumbent in-flight "
            f"{window['incumbent_inflight_requests']}")


def _checks(restore: dict[str, Any]) -> str:
    checks: dict[str, bool] = restore["checks"]
    if not checks:
        return "checks: none known"
    passed = [name for name, ok in checks.items() if ok]
    failed = {item["check"]: item for item in restore.get("failed_checks") or []}
    parts = [f"{len(passed)} passed ({', '.join(passed)})"] if passed else []
    for name, ok in checks.items():
        if not ok:
            item = failed.get(name, {})
            why = (f": expected {item['expected']}, found {item['found']}"
                   if "expected" in item else "")
            parts.append(f"{name} FAILED{why}")
    return "checks: " + "; ".join(parts)


class RestoreNarrator:
    """The restore story as `/status` tells it: a line when the phase, the generation or the
    window changes."""

    def __init__(self, stamp: Stamp) -> None:
        self.stamp = stamp
        self.last: tuple[object, ...] | None = None
        self.window_start: float | None = None

    def lines(self, status: dict[str, Any]) -> list[str]:
        restore = status["restore"]
        window = restore["window"]
        key = (restore["phase"], status["generation"], None if window is None else window["start"],
               repr(restore["last_window"]))
        if key == self.last:
            return []
        first = self.last is None
        self.last = key
        head = f"{restore['phase']:<10}"
        if window is not None:
            opened = window["start"] != self.window_start
            self.window_start = window["start"]
            if opened:
                return [self.stamp("restore", f"{head} window opened (cause {window['cause']}): "
                                   + _window(window))]
            return [self.stamp("restore", f"{head} " + _window(window))]
        last = restore["last_window"]
        text = f"{head} generation {status['generation']}"
        if last is not None and (first or self.window_start is not None):
            took = last["duration_seconds"]  # None: a restore nobody watched
            text += (f"; window closed {last['outcome']}"
                     + (f" after {took:.1f}s" if took is not None else ""))
            lost = last.get("lost_requests")
            if lost:
                text += f", {lost} incumbent requests lost"
            self.window_start = None
            return [self.stamp("restore", text), INDENT + _checks(restore)]
        if first:
            text += " (no restore window open)"
        return [self.stamp("restore", text)]
