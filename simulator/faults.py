"""One-shot faults in the request path, armed by ``POST /admin/fault``: what makes a measured
repetition invalid, on a schedule a test can name exactly.

A fault is armed to fire at the N-th completion request the engine receives after arming
(``after_requests`` = N - 1, so 0 is the very next one); arming the same request twice keeps both.

| kind | at that request |
| --- | --- |
| ``restart`` | the engine restarts (same container, a new incarnation) before serving it |
| ``drop`` | the request is answered 500 and never counted as finished: a dropped request |
| ``short`` | it generates half its ``max_tokens`` and stops (``finish_reason`` ``stop``) |
| ``clock_jump`` | the engine's wall clock steps by ``seconds`` (its process clock does not) |
| ``rank_lost`` | the snapshot stops listing the last rank (until the next restart) |
| ``store_fail`` | its host stores fail: each frees its records and counts as ``failed`` (v3) |
"""

from __future__ import annotations

from collections import Counter
from typing import Literal, get_args

FaultKind = Literal["restart", "drop", "short", "clock_jump", "rank_lost", "store_fail"]
KINDS: tuple[FaultKind, ...] = get_args(FaultKind)


class Faults:
    """The armed faults, by the request count at which each fires."""

    def __init__(self) -> None:
        self.seen = 0  # completion requests received since the app started
        self._armed: list[tuple[int, FaultKind, float]] = []
        self.fired: Counter[str] = Counter()

    def arm(self, kind: FaultKind, after_requests: int, seconds: float = 0.0) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}")
        if after_requests < 0:
            raise ValueError("after_requests must not be negative")
        self._armed.append((self.seen + after_requests + 1, kind, seconds))

    def next_request(self) -> list[tuple[FaultKind, float]]:
        """Count one completion request; the faults that fire at it, in the order armed."""
        self.seen += 1
        due = [(kind, seconds) for at, kind, seconds in self._armed if at == self.seen]
        self._armed = [a for a in self._armed if a[0] > self.seen]
        for kind, _ in due:
            self.fired[kind] += 1
        return due

    def describe(self) -> dict[str, object]:
        return {"requests_seen": self.seen,
                "armed": [{"kind": k, "at_request": at, "seconds": s} for at, k, s in self._armed],
                "fired": dict(sorted(self.fired.items()))}
