"""The bcrypt hashes of `basic_auth_users`: what can be told about one cheaply when the file loads,
and its trial against the deployment example's password, which costs a full check.

`readable(h)`: whether python-bcrypt can check `h` at all. A check at cost 4 reads the same
version and salt as one at the hash's own cost, so it answers in about a millisecond whatever
the cost: a hash bcrypt cannot read is an error at load, never a 401 on every login.

`Trials`: whether a hash verifies the deployment example's password (exporter/placeholders.py),
so that a user still holding the example's hash is refused. That takes one full check, 15 s at
cost 18 on one core of 2026: a load tries now only the hashes predicted to fit its budget
(`AUTH_LOAD_TRIAL_BUDGET`, cost 4's time doubled per cost step), and `in_background` tries the
rest in one thread at the lowest CPU priority, so that no cost delays listening or a scrape. A
login needs no trial to be safe: the right password of such a hash is the example's, which
exporter/web/basic_auth.py refuses on its own. Verdicts are kept per hash: a reload of an
unchanged file costs nothing.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import bcrypt

from exporter import placeholders

PLACEHOLDER = placeholders.SCRAPE_PASSWORD.encode()


def cost(hashed: bytes) -> int:
    """The cost of a hash that matched webconfig's pattern (`$2y$10$...` -> 10)."""
    return int(hashed[4:6])


def readable(hashed: bytes) -> bool:
    try:
        bcrypt.checkpw(b"", hashed[:4] + b"04" + hashed[6:])
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Trial:
    placeholder: bool  # the hash verifies the deployment example's password
    seconds: float  # CPU time of the check: what one check of this hash costs here


Done = Callable[[bytes, Trial], None]


class Trials:
    def __init__(self, password: bytes = PLACEHOLDER, keep: int = 1024) -> None:
        self._password, self._keep = password, keep
        self._done: OrderedDict[bytes, Trial] = OrderedDict()
        self._lock = threading.Lock()
        self._queue: list[tuple[bytes, Done]] = []
        self._thread: threading.Thread | None = None
        self._cost4 = 0.0  # seconds of the quickest check at cost 4 seen: the unit of prediction

    def verdict(self, hashed: bytes) -> Trial | None:
        with self._lock:
            return self._done.get(hashed)

    def predicted(self, hashed: bytes) -> float:
        """Seconds one check of `hashed` should take here (a check at cost 4 measured once)."""
        if not self._cost4:
            t0 = time.thread_time()
            bcrypt.checkpw(b"", bcrypt.hashpw(b"", bcrypt.gensalt(4)))
            self._cost4 = max(time.thread_time() - t0, 1e-4)
        return float(self._cost4 * 2 ** (cost(hashed) - 4) / 2)  # hashpw + checkpw: two checks

    def try_now(self, hashes: Iterable[bytes], budget: float) -> None:
        """Try the hashes not tried yet, cheapest first, while the next is predicted to fit
        within `budget` seconds in all."""
        spent = 0.0
        for hashed in sorted(set(hashes), key=cost):
            if self.verdict(hashed) is not None:
                continue
            if spent + self.predicted(hashed) > budget:
                break
            trial = self._try(hashed)
            spent += trial.seconds

    def in_background(self, hashes: Iterable[bytes], done: Done) -> None:
        """Try the hashes not tried yet in one background thread, cheapest first; `done(hash,
        trial)` is called in that thread for each."""
        with self._lock:
            queued = {h for h, _ in self._queue}
            for hashed in sorted(set(hashes), key=cost):
                if hashed not in self._done and hashed not in queued:
                    self._queue.append((hashed, done))
            if self._queue and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._work, name="bcrypt-trials",
                                                daemon=True)
                self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Until the background queue is empty (tests); True when it is."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        with self._lock:
            return not self._queue and (thread is None or not thread.is_alive())

    def _work(self) -> None:
        # The lowest priority for this thread alone (Linux schedules threads as tasks): a trial
        # uses only CPU time nothing else wants.
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while True:
            with self._lock:
                if not self._queue:
                    return
                hashed, done = self._queue[0]
            trial = self.verdict(hashed) or self._try(hashed)
            with self._lock:
                self._queue.pop(0)
            done(hashed, trial)

    def _try(self, hashed: bytes) -> Trial:
        t0 = time.thread_time()
        try:
            placeholder = bcrypt.checkpw(self._password, hashed)
        except ValueError:  # readable() let it through: cannot be the example's either
            placeholder = False
        trial = Trial(placeholder, time.thread_time() - t0)
        with self._lock:
            self._done[hashed] = trial
            while len(self._done) > self._keep:
                self._done.popitem(last=False)
        return trial


TRIALS = Trials()  # one per process: the command line's check of the file and the sidecar share it
