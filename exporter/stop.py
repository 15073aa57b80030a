"""A prompt stop: the sidecar ends within `STOP_GRACE` seconds of SIGTERM, SIGINT or SIGHUP,
whatever a thread is stuck in.

The orderly stop (exporter/sidecar.py) stops polling, writes the restore state, closes the
server and releases the state directory's lock. Python then waits, without a bound, for every
non-daemon thread: a source's worker stuck in a hung NVML device-list call, or a file write
stuck on a dead disk, kept the process (and the lock) for as long as the call hung. So:

- once the orderly stop is done, threads still running get `JOIN_GRACE` seconds, and then the
  process leaves at once (`os._exit`) with the orderly stop's status, after the log queue is
  flushed: what was stuck held nothing that is not already on disk;
- if the orderly stop itself is not done `STOP_GRACE` seconds after the signal, a timer thread
  logs it and leaves with status 1 (the restore state is written at every change, never only
  at the stop, so what was acknowledged is on disk already).

Kubernetes waits 30 s (terminationGracePeriodSeconds) before SIGKILL; `STOP_GRACE` is well
inside it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Final

import structlog

log = structlog.get_logger("helios_exporter")

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_GRACE: Final = 10.0
JOIN_GRACE: Final = 1.0


def stuck_threads() -> list[threading.Thread]:
    """Threads that would hold the interpreter's exit: alive, not daemon, not this one."""
    me = threading.current_thread()
    return [t for t in threading.enumerate()
            if t is not me and t is not threading.main_thread() and not t.daemon and t.is_alive()]


class StopDeadline:
    def __init__(self, grace: float, *, enforce: bool, flush: Callable[[float], object],
                 leave: Callable[[int], object] = os._exit) -> None:
        """`enforce`: leave the process (a sidecar in a process of its own); otherwise only
        log. `flush(timeout)`: the log queue's. `leave`: how the process ends."""
        self.grace, self.enforce = grace, enforce
        self._flush, self._leave = flush, leave
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        """At the first stop signal: the orderly stop must be done within the grace."""
        if self._timer is not None or not self.enforce:
            return
        self._timer = threading.Timer(self.grace, self._overdue)
        self._timer.daemon = True
        self._timer.start()

    def leave_stuck_threads(self, status: int) -> None:
        """After the orderly stop: leave now if a thread would hold the exit, or the log queue
        cannot be written out (a stderr nobody reads: the interpreter's own exit would wait on
        it)."""
        if self._timer is not None:
            self._timer.cancel()
        until = time.monotonic() + JOIN_GRACE
        for thread in stuck_threads():
            thread.join(max(0.0, until - time.monotonic()))
        left = stuck_threads()
        if left:
            log.warning("threads_stuck_at_stop", threads=sorted(t.name for t in left),
                        action="leaving without them" if self.enforce else "none (in process)")
        flushed = self._flush(JOIN_GRACE)
        if self.enforce and (left or not flushed):
            self._leave(status)

    def _overdue(self) -> None:
        log.error("stop_overdue", grace_seconds=self.grace,
                  threads=sorted(t.name for t in stuck_threads()),
                  action="leaving now; the restore state is written at every change")
        self._exit(1)

    def _exit(self, status: int) -> None:
        # Bounded: a log pipe nobody reads must not hold the exit either (stderr itself is
        # never flushed here: that write could block for ever).
        self._flush(JOIN_GRACE)
        self._leave(status)
