"""ASGI middleware for `--web-config-file`: basic auth, the configured headers, the rate limit.

Basic auth guards every request except the probes (`/healthz`, `/readyz`: a kubelet has no
password) and the two POST APIs that carry their own bearer token (a request has one
Authorization header), and `GET /experiment/phases` too when the events token is configured (that
token guards it then). So `/metrics`, `/status`, the status page `/`, `GET /experiment/phases`
without an events token and anything added later are protected by default, as
exporter-toolkit protects every path of the exporter it wraps. The rate limit
(`rate_limit`, one token bucket for the whole server as in exporter-toolkit) spares the probes too:
a liveness probe answered 429 would get the pod restarted.

Installed only when the file is given: without it the app runs as it was, with no extra cost.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from exporter.web.auth import AuthFailures, too_many
from exporter.web.basic_auth import BasicAuth, Verdict
from exporter.web.state import WebConfigState
from exporter.web.webconfig import RateLimit

PROBES = frozenset({"/healthz", "/readyz"})
BEARER_APIS = frozenset({"/restore/events", "/experiment/phases"})  # their POST only
UNAUTHORIZED = b"Unauthorized\n"


class TokenBucket:
    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self._clock = limit, clock
        self._tokens, self._at = float(limit.burst), clock()

    def allow(self) -> bool:
        now = self._clock()
        self._tokens = min(self.limit.burst, self._tokens + (now - self._at) / self.limit.interval)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


class WebGuard:
    def __init__(self, app: ASGIApp, state: WebConfigState, failures: AuthFailures,
                 basic: BasicAuth | None = None, *, bearer_gets: frozenset[str] = frozenset()
                 ) -> None:
        """`bearer_gets`: paths whose GET the app guards with a bearer token of its own."""
        self.app, self.state, self.failures = app, state, failures
        self.bearer_gets = bearer_gets
        self.basic = basic or BasicAuth()
        self._bucket: TokenBucket | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        config = self.state.config
        path: str = scope["path"]
        if config.headers:
            send = _with_headers(send, [(k.lower().encode(), v.encode())
                                        for k, v in config.headers])
        if config.rate_limit is not None and path not in PROBES and not self._allow(config.rate_limit):
            await _plain(send, 429, b"Too Many Requests\n", [(b"retry-after", b"1")])
            return
        if config.users and path not in PROBES and not (
                path in BEARER_APIS and scope["method"] == "POST") and not (
                path in self.bearer_gets and scope["method"] in ("GET", "HEAD")):
            # Checked against the users less those refused since the file loaded (all of them
            # refused: every request is refused, never let through).
            denied = await self._check(scope, self.state.users, path)
            if denied is not None:
                await denied(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _allow(self, limit: RateLimit) -> bool:
        if self._bucket is None or self._bucket.limit != limit:
            self._bucket = TokenBucket(limit)
        return self._bucket.allow()

    async def _check(self, scope: Scope, users: Mapping[str, bytes], path: str) -> ASGIApp | None:
        arrived = time.monotonic()
        client = scope["client"][0] if scope.get("client") else None
        header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        if header is None:
            self.failures.missing(path, client, "basic")
            return _unauthorized
        user, password = _basic_credentials(header)
        # Credentials verified before (no bcrypt) pass even while this address is slowed down:
        # what fails beside Prometheus (a stale job, a guesser behind the same NAT) must not keep
        # it out. Rationed during a penalty (exporter/web/auth.py), or the cache would answer
        # guesses at network speed; a cached success leaves the failure record as it is.
        if user is not None and self.failures.may_check_cache(client) \
                and self.basic.cached(users, user, password):
            return None
        # Anything else waits out the penalty unseen: a bcrypt check per guess is what the
        # penalty exists to ration.
        wait = self.failures.penalty(path, client)
        if wait is not None:
            return too_many(wait)
        if user is None:  # not basic auth, or not decodable: nothing to check
            self.failures.failed(path, client, "basic")
            return _unauthorized
        known = user in users

        def counted(ok: bool) -> None:  # once per check, also after its request got a 429
            if ok:
                self.failures.succeeded(client)
            else:
                self.failures.failed(path, client, "basic", user if known else None)

        verdict = await self.basic.verify(users, user, password, client=client,
                                          priority=1 if self.failures.failing(client) else 0,
                                          arrived=arrived, on_verdict=counted)
        if verdict is Verdict.OK:
            return None
        if verdict is Verdict.WRONG:
            return _unauthorized
        self.failures.pending(path, client, "busy" if verdict is Verdict.BUSY else "late")
        return _still_checking if verdict is Verdict.LATE else _busy


def _basic_credentials(header: bytes) -> tuple[str | None, bytes]:
    scheme, _, value = header.partition(b" ")
    if scheme.lower() != b"basic":
        return None, b""
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
        user, sep, password = decoded.partition(b":")
        return (user.decode("utf-8") if sep else None), password
    except (binascii.Error, UnicodeDecodeError):
        return None, b""


async def _still_checking(scope: Scope, receive: Receive, send: Send) -> None:
    await _plain(send, 429, b"Too Many Requests: your credentials are still being checked; retry\n",
                 [(b"retry-after", b"1")])


async def _busy(scope: Scope, receive: Receive, send: Send) -> None:
    await _plain(send, 429, b"Too Many Requests: a check of this client's credentials is still "
                 b"running; retry\n", [(b"retry-after", b"1")])


async def _unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    await _plain(send, 401, UNAUTHORIZED,
                 [(b"www-authenticate", b'Basic realm="helios-exporter", charset="UTF-8"')])


async def _plain(send: Send, status: int, body: bytes,
                 headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)
    return wrapped
