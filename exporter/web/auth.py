"""Failed credentials: counted by path, logged without the secret, and repeated ones slowed down.

One `AuthFailures` serves every check of the sidecar: the bearer token of `POST /restore/events`
and the experiment-phase API (`bearer_denied`), and basic auth (exporter/web/guard.py), so that a
client guessing on one path is slowed down on all of them.

The slow-down: a client (its IP address) may fail `AUTH_FREE_FAILURES` times; each failure after
that starts a penalty of 1 s, doubled with every further failure up to 60 s. While a penalty runs,
every request of that client that presents credentials is answered 429 with `Retry-After`, at
once and without looking at them: no bcrypt, no token comparison, no connection held open while
it waits (a delayed answer would tie up a connection slot, the very thing a flood wants). A
success checked in full (bcrypt, or the bearer token) forgets the client, and so do 10 minutes
without a failure. A request without credentials is counted (`reason="missing"`, as a browser's
first request for `/` is) but never penalised. At most `max_clients` clients are remembered, the
least recently failing ones forgotten first.

One exception, for the right credentials: basic-auth credentials that were verified before (the
success cache of exporter/web/basic_auth.py, exporter/web/guard.py) and the right bearer token
(`bearer_denied`) are let through during a penalty, so that whatever fails from Prometheus's or
the restore tooling's address (a stale scrape job or script, a guesser behind the same NAT)
cannot keep them out. Comparing with the cache costs nothing, and answers differently for the right
password, so during a penalty it is rationed (`may_check_cache`): at most one comparison per
`AUTH_PENALTY_CACHE_CHECK_INTERVAL` seconds per client, in bursts of
`AUTH_PENALTY_CACHE_CHECK_BURST`, or the penalty would become a guessing oracle as fast as the
network. Such a cached success does not forget the client either: a scrape every few seconds
would otherwise wipe out the record of whoever fails beside it.
"""

from __future__ import annotations

import hmac
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from fastapi import Request
from fastapi.responses import JSONResponse

from exporter.defaults import (
    AUTH_FORGET_AFTER,
    AUTH_FREE_FAILURES,
    AUTH_PENALTY_CACHE_CHECK_BURST,
    AUTH_PENALTY_CACHE_CHECK_INTERVAL,
    AUTH_PENALTY_FIRST,
    AUTH_PENALTY_MAX,
)
from exporter.labels import AUTH_FAILURE_REASONS, AUTH_PATHS

log = structlog.get_logger("helios_exporter.auth")


@dataclass
class _Client:
    failures: int = 0
    last: float = 0.0
    until: float = 0.0  # end of the current penalty (monotonic)
    cache_checks: float = math.inf  # comparisons with the success cache left (a token bucket)
    cache_checked: float = 0.0  # when that bucket was last filled up


class AuthFailures:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 free: int = AUTH_FREE_FAILURES, first: float = AUTH_PENALTY_FIRST,
                 cap: float = AUTH_PENALTY_MAX, forget: float = AUTH_FORGET_AFTER,
                 max_clients: int = 10_000,
                 cache_check_interval: float = AUTH_PENALTY_CACHE_CHECK_INTERVAL,
                 cache_check_burst: int = AUTH_PENALTY_CACHE_CHECK_BURST) -> None:
        self._clock, self._free, self._first, self._cap = clock, free, first, cap
        self._forget, self._max = forget, max_clients
        self._cache_interval, self._cache_burst = cache_check_interval, cache_check_burst
        self.counts = {(path, reason): 0 for path in AUTH_PATHS for reason in AUTH_FAILURE_REASONS}
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    @staticmethod
    def path_label(path: str) -> str:
        return path if path in AUTH_PATHS else "other"

    def penalty(self, path: str, client: str | None) -> float | None:
        """Seconds this client must still wait before its credentials are looked at (the request
        is then refused and counted as `throttled`), or None."""
        record = self._record(client, create=False)
        if record is None:
            return None
        left = record.until - self._clock()
        if left <= 0:
            return None
        self.counts[(self.path_label(path), "throttled")] += 1
        return left

    def penalty_running(self, client: str | None) -> bool:
        """Whether this client is slowed down now (nothing is counted)."""
        record = self._record(client, create=False)
        return record is not None and record.until > self._clock()

    def may_check_cache(self, client: str | None) -> bool:
        """Whether this client's basic-auth credentials may be compared with the cache of
        verified ones now: always, except during a penalty, when the comparisons are rationed
        (the module's docstring says why). A True during a penalty uses up one comparison."""
        record = self._record(client, create=False)
        now = self._clock()
        if record is None or record.until <= now:
            return True
        refill = (now - record.cache_checked) / self._cache_interval
        record.cache_checks = min(float(self._cache_burst), record.cache_checks + refill)
        record.cache_checked = now
        if record.cache_checks >= 1:
            record.cache_checks -= 1
            return True
        return False

    def missing(self, path: str, client: str | None, scheme: str) -> None:
        self.counts[(self.path_label(path), "missing")] += 1
        log.debug("auth_missing", path=self.path_label(path), client=client, scheme=scheme)

    def failed(self, path: str, client: str | None, scheme: str, user: str | None = None) -> None:
        """Wrong credentials. `user`: the basic-auth user name when it is a configured one (a
        name that is not configured is never logged: it may be a mistyped password)."""
        label = self.path_label(path)
        self.counts[(label, "wrong")] += 1
        record = self._record(client, create=True)
        fields = {"path": label, "client": client, "scheme": scheme}
        if scheme == "basic":
            fields["user"] = user if user is not None else "(not a configured user)"
        if record is None:
            log.warning("auth_failed", **fields)
            return
        now = self._clock()
        if now - record.last > self._forget:
            record.failures = 0
        record.failures += 1
        record.last = now
        over = record.failures - self._free
        if over > 0:
            wait = min(self._cap, self._first * 2 ** (over - 1))
            record.until = now + wait
            log.warning("auth_failed", failures=record.failures, slowed_down_s=wait, **fields)
        else:
            log.warning("auth_failed", failures=record.failures, **fields)

    def pending(self, path: str, client: str | None, why: str) -> None:
        """Answered 429 while its basic-auth check was not done (`late`) or not started because
        another check of this client runs (`busy`): not a failure, not penalised."""
        self.counts[(self.path_label(path), "pending")] += 1
        log.debug("auth_pending", path=self.path_label(path), client=client, why=why)

    def failing(self, client: str | None) -> bool:
        """Whether this client has failed credentials on record (its checks wait behind those of
        clients without)."""
        record = self._record(client, create=False)
        return record is not None and record.failures > 0

    def succeeded(self, client: str | None) -> None:
        if client is not None:
            self._clients.pop(client, None)

    def throttled_clients(self) -> int:
        now = self._clock()
        return sum(1 for r in self._clients.values() if r.until > now)

    def remembered_clients(self) -> int:
        """Clients with failures on record (at most `max_clients`)."""
        return len(self._clients)

    def _record(self, client: str | None, *, create: bool) -> _Client | None:
        if client is None:
            return None
        record = self._clients.get(client)
        if record is None:
            if not create:
                return None
            record = self._clients[client] = _Client()
            while len(self._clients) > self._max:
                self._clients.popitem(last=False)
        else:
            self._clients.move_to_end(client)
        return record


def bearer_matches(header: str | None, token: bytes) -> bool:
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    # compare_digest on bytes of possibly different length still takes time independent of content.
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token)


def bearer_denied(request: Request, token: bytes, failures: AuthFailures,
                  path: str) -> JSONResponse | None:
    """The bearer-token check of an API route: None when the token is right, else the answer
    (401, or 429 while the client is slowed down). `path` is the route's own path, one of
    `exporter.labels.AUTH_PATHS`. Use:

        denied = bearer_denied(request, events_token, auth_failures, "/experiment/phases")
        if denied is not None:
            return denied
    """
    header = request.headers.get("authorization")
    client = request.client.host if request.client else None
    if not header:
        failures.missing(path, client, "bearer")
        return _unauthorized()
    # The right token is never locked out by others' failures from the same address (a stale
    # script, a guesser behind the same NAT): during a penalty it is still compared, rationed
    # as basic auth's success cache is (`may_check_cache`), so the penalty does not become a
    # guessing oracle; such a success leaves the failure record as it is.
    if failures.penalty_running(client) and failures.may_check_cache(client) \
            and bearer_matches(header, token):
        return None
    # The penalty first, before the token is looked at: comparing a token costs nothing, so
    # looking at it during a penalty would answer guesses as fast as they come (basic auth's
    # success cache is rationed for the same reason, exporter/web/guard.py).
    wait = failures.penalty(path, client)
    if wait is not None:
        return too_many(wait)
    if bearer_matches(header, token):
        failures.succeeded(client)
        return None
    failures.failed(path, client, "bearer")
    return _unauthorized()


def _unauthorized() -> JSONResponse:
    return JSONResponse({"detail": "missing or wrong bearer token"}, status_code=401,
                        headers={"WWW-Authenticate": "Bearer"})


def too_many(wait: float) -> JSONResponse:
    return JSONResponse({"detail": "too many failed attempts from this client; retry later"},
                        status_code=429, headers={"Retry-After": str(max(1, math.ceil(wait)))})
