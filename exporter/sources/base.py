"""What every source returns, and the per-source health the collector renders.

A source talks to one thing and returns a `Result`: the value on success, or a closed-set
`ErrorReason` plus a human message (logs and /status only, never a label).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
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


@dataclass(frozen=True, slots=True)
class SourceHealth:
    """One source's health after its latest poll; `recorded()` returns the next one."""

    enabled: bool = True
    up: bool | None = None  # None until the first poll
    errors: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))  # by reason
    last_success: float | None = None
    last_duration: float | None = None
    last_error: str = ""
    last_reason: str = ""

    def recorded(self, result: Result[object]) -> SourceHealth:
        if result.ok:
            return replace(self, up=True, last_success=result.started + result.duration,
                           last_duration=result.duration, last_error="", last_reason="")
        assert result.reason is not None
        errors = dict(self.errors)
        errors[result.reason.value] = errors.get(result.reason.value, 0) + 1
        return replace(self, up=False, errors=MappingProxyType(errors),
                       last_duration=result.duration, last_error=result.message,
                       last_reason=result.reason.value)

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
