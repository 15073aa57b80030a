"""What every source returns, and the per-source health the collector renders.

A source talks to one thing and returns a `Result`: the value on success, or a closed-set
`ErrorReason` plus a human message (logs and /status only, never a label).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from exporter.labels import ErrorReason

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Result(Generic[T]):
    value: T | None
    started: float  # wall clock, unix seconds
    duration: float  # seconds
    reason: ErrorReason | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.reason is None


@dataclass(slots=True)
class SourceHealth:
    """Mutable health of one source; only the poller writes it."""

    enabled: bool = True
    up: bool | None = None  # None until the first poll
    errors: Counter[str] = field(default_factory=Counter)
    last_success: float | None = None
    last_duration: float | None = None
    last_error: str = ""
    last_reason: str = ""

    def record(self, result: Result[object]) -> None:
        self.last_duration = result.duration
        if result.ok:
            self.up = True
            self.last_success = result.started + result.duration
            self.last_error = ""
            self.last_reason = ""
        else:
            assert result.reason is not None
            self.up = False
            self.errors[result.reason.value] += 1
            self.last_error = result.message
            self.last_reason = result.reason.value

    def as_status(self) -> dict[str, object]:
        return {
            "enabled": self.enabled,
            "up": self.up,
            "last_success": self.last_success,
            "last_duration_seconds": self.last_duration,
            "last_reason": self.last_reason or None,
            "last_error": self.last_error or None,
            "errors": dict(self.errors),
        }
