"""Injectable clocks: the engine and the scenarios read time only through one of these."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


def wall_clock() -> float:
    """Unix time in seconds."""
    return time.time()


class ManualClock:
    """A clock that moves only when told to; tests drive scenarios with it instead of sleeping."""

    def __init__(self, start: float = 1_764_389_520.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"time does not run backwards ({seconds} s)")
        self.now += seconds
