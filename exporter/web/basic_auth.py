"""Basic-auth credentials checked against the bcrypt hashes of `basic_auth_users`, so that no slow
hash and no client can stall the others.

As exporter-toolkit does: an unknown user is checked against a dummy hash so that timing does not
tell which users exist, and a successful check is cached, so that a scrape every few seconds does
not pay bcrypt each time. Unlike exporter-toolkit (one bcrypt at a time for the whole server, a
dummy of cost 10, failures cached beside successes, keyed by the password):

- **bounded and fair**: at most `AUTH_CHECK_WORKERS` checks run at once, in threads of their own
  (bcrypt releases the GIL: the event loop keeps serving), and at most one per client address; a
  second check of a client whose first is still running is not started (429 at once). Clients
  with failed credentials on record share the workers less one, which is kept for clients
  without; waiting checks go best first (exporter/web/gate.py). So guessers, one or many, never
  hold every worker: Prometheus's check starts at once unless other new clients' checks hold
  them, and then waits for one of those;
- **answered in time**: a request is answered within `AUTH_ANSWER_WITHIN` of its arrival: 200,
  401, or 429 (`Retry-After`) while its check is not done. The check itself runs on: its success
  is cached for the next scrape, its failure counted when it comes;
- **shared**: identical credentials arriving while their check runs wait for that check (a retry
  costs nothing);
- **a dummy of moderate cost**: the median cost of the configured hashes, at most
  `AUTH_DUMMY_MAX_COST`: as slow as a typical user's check, never as slow as the slowest;
- **keyed HMACs, successes only**: cache keys are HMACs under a key drawn at start (no password is
  kept in memory, and a lookup's timing says nothing about it); wrong guesses are slowed down
  instead (exporter/web/auth.py). A changed hash (a reloaded configuration) changes the key: old
  entries never match;
- **never the example's password**: credentials that verify but are the deployment example's
  placeholder password are refused and logged, whether or not the load's trial of that hash has
  finished (exporter/web/hashes.py).

Passwords longer than 72 bytes are cut to 72, which is what Go's bcrypt (and so exporter-toolkit)
compares.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import hmac
import os
import queue
import statistics
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import bcrypt
import structlog

from exporter.defaults import (
    AUTH_ANSWER_WITHIN,
    AUTH_CHECK_QUEUE,
    AUTH_CHECK_WORKERS,
    AUTH_DUMMY_MAX_COST,
)
from exporter.web import hashes
from exporter.web.gate import Full, Gate

BCRYPT_MAX_PASSWORD = 72
log = structlog.get_logger("helios_exporter.auth")


# How much lower the CPU priority of checks for clients with failures is (nice levels).
LOW_PRIORITY_NICE = 10

class Verdict(enum.Enum):
    OK = "ok"
    WRONG = "wrong"
    BUSY = "busy"  # not checked: another check of this client runs, or no room to wait
    LATE = "late"  # still being checked when the answer was due


Check = Callable[[bytes, bytes], bool]
OnVerdict = Callable[[bool], None]


class BasicAuth:
    def __init__(self, *, workers: int = AUTH_CHECK_WORKERS, waiting: int = AUTH_CHECK_QUEUE,
                 answer_within: float = AUTH_ANSWER_WITHIN,
                 dummy_max_cost: int = AUTH_DUMMY_MAX_COST, max_cached: int = 64,
                 check: Check | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`check(password, hash)`: one bcrypt check (tests pass one they can hold)."""
        self._key = os.urandom(32)
        self._ok: OrderedDict[bytes, None] = OrderedDict()
        self._max = max_cached
        self._answer_within, self._dummy_max = answer_within, dummy_max_cost
        self._check = check or check_password
        self._clock = clock
        self._workers = workers
        self._waiting = waiting
        self._gate: Gate | None = None  # made on the event loop's first use
        self._pool: _Threads | None = None
        self._low_pool: _Threads | None = None  # checks of clients with failures, niced
        self._running: dict[bytes, asyncio.Task[Verdict]] = {}  # cache key -> its check
        self._clients: dict[str | None, bytes] = {}  # client -> the key of its check
        self._dummies: dict[int, bytes] = {}

    def cached(self, users: Mapping[str, bytes], user: str, password: bytes) -> bool:
        """True when these exact credentials were verified before (against the hash the user has
        now): no bcrypt, a keyed hash and a lookup."""
        hashed = users.get(user)
        if hashed is None:
            return False
        key = self._cache_key(user, hashed, password)
        if key in self._ok:
            self._ok.move_to_end(key)
            return True
        return False

    def _cache_key(self, user: str, hashed: bytes, password: bytes) -> bytes:
        name = user.encode()
        return hmac.new(self._key, b"%d:%b%d:%b%b" % (len(name), name, len(hashed), hashed,
                                                      password), hashlib.sha256).digest()

    @property
    def checks_running(self) -> int:
        """Checks started or waiting for a turn (the ones of clients still waiting included)."""
        return len(self._running)

    async def verify(self, users: Mapping[str, bytes], user: str, password: bytes, *,
                     client: str | None = None, priority: int = 0,
                     arrived: float | None = None,
                     on_verdict: OnVerdict | None = None) -> Verdict:
        """Check `user`'s `password`, answering within `answer_within` of `arrived` (the
        request's arrival, by the clock given; now by default). `priority` 0 goes before 1.
        `on_verdict(ok)` is called once when this check (not one it joined) has its verdict,
        also after a LATE answer."""
        arrived = self._clock() if arrived is None else arrived
        if self.cached(users, user, password):
            return Verdict.OK
        hashed = users.get(user)
        dummy_cost = _dummy_cost(users, self._dummy_max)
        key = self._cache_key(user, hashed if hashed is not None else b"%d" % dummy_cost, password)
        task = self._running.get(key)
        if task is None:
            if client in self._clients:
                return Verdict.BUSY
            task = asyncio.get_running_loop().create_task(
                self._run(key, client, priority, user, hashed, password, dummy_cost, on_verdict))
            self._running[key] = task
            self._clients[client] = key
        left = arrived + self._answer_within - self._clock()
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(left, 0.0))
        except TimeoutError:
            return Verdict.LATE

    async def _run(self, key: bytes, client: str | None, priority: int, user: str,
                   hashed: bytes | None, password: bytes, dummy_cost: int,
                   on_verdict: OnVerdict | None) -> Verdict:
        try:
            if self._gate is None or self._pool is None or self._low_pool is None:
                self._gate = Gate(self._workers, self._waiting)
                self._pool = _Threads(self._workers)
                # The gate lets clients with failures hold all slots but the reserved one; their
                # checks run on threads of lower CPU priority, so that a clean client's check
                # (Prometheus after a restart) gets the CPU first on a busy machine too.
                self._low_pool = _Threads(max(1, self._workers - 1), nice=LOW_PRIORITY_NICE)
            pool = self._pool if priority <= 0 else self._low_pool
            async with self._gate.slot(priority):
                reference = hashed if hashed is not None else await pool.run(
                    self._dummy, dummy_cost)
                matches = await pool.run(self._check, password, reference)
        except Full:
            return Verdict.BUSY
        finally:
            self._running.pop(key, None)
            if self._clients.get(client) == key:
                del self._clients[client]
        ok = matches and hashed is not None
        if ok and hmac.compare_digest(password[:BCRYPT_MAX_PASSWORD],
                                      hashes.PLACEHOLDER[:BCRYPT_MAX_PASSWORD]):
            log.error("auth_placeholder_password", user=user, client=client,
                      reason="the deployment example's password (deploy/kubernetes-tls), which "
                      "anyone can read: refused; choose a password and put its hash in the web "
                      "configuration")
            ok = False
        if ok:
            self._ok[key] = None
            while len(self._ok) > self._max:
                self._ok.popitem(last=False)
        if on_verdict is not None:
            on_verdict(ok)
        return Verdict.OK if ok else Verdict.WRONG

    def _dummy(self, cost: int) -> bytes:
        """A hash of a random password at `cost` (made once per cost, in a worker)."""
        if cost not in self._dummies:
            self._dummies[cost] = bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(cost))
        return self._dummies[cost]

    def close(self) -> None:
        for task in list(self._running.values()):
            task.cancel()


T = TypeVar("T")


class _Threads:
    """`size` daemon threads for bcrypt, at `nice` above the process's (Linux sets it per
    thread; elsewhere, or where it is refused, they run as the process does). Not
    concurrent.futures' pool: the interpreter joins its threads at exit, so a cost-18 check
    running at SIGTERM would hold the exit for 15 s."""

    def __init__(self, size: int, nice: int = 0) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._nice = nice
        for i in range(size):
            threading.Thread(target=self._work, name=f"bcrypt-{'low-' if nice else ''}{i}",
                             daemon=True).start()

    def _work(self) -> None:
        if self._nice:
            with contextlib.suppress(OSError, AttributeError):
                tid = threading.get_native_id()
                os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid)
                               + self._nice)
        while True:
            self._jobs.get()()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def job() -> None:
            result: T | None = None
            error: BaseException | None = None
            try:
                result = fn(*args)
            except Exception as exc:
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (shutdown)
                loop.call_soon_threadsafe(_settle, future, result, error)
        self._jobs.put(job)
        return await future


def _settle(future: asyncio.Future[T], result: T | None, exc: BaseException | None) -> None:
    if future.done():  # its waiter was cancelled
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]


def _dummy_cost(users: Mapping[str, bytes], most: int) -> int:
    costs = [hashes.cost(h) for h in users.values()]
    return min(statistics.median_low(costs), most) if costs else min(10, most)


def check_password(password: bytes, hashed: bytes) -> bool:
    """One bcrypt check, as Go's bcrypt (and so exporter-toolkit) makes it."""
    try:
        return bcrypt.checkpw(password[:BCRYPT_MAX_PASSWORD], hashed)
    except ValueError:  # a hash bcrypt cannot read (the web configuration refuses those at load)
        return False
