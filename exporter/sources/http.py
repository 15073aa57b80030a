"""The sidecar's one way out: every outbound HTTP request goes through `request`.

The engine's snapshot and /metrics (exporter/sources/engine.py) and the preflight probes
(exporter/restore/preflight.py) use it; tests/exporter/sources/test_one_way_out.py fails when
another module of `exporter/` calls httpx's request methods itself. What it
guarantees, whatever the server does:

- **One deadline for the whole request** (`Bounds.deadline`): connect, head, every byte of the
  body and its decoding. httpx times each phase and each single read on its own, so a server
  that drips a byte per read never trips those; `asyncio.timeout` around the whole does.
- **At most `Bounds.max_bytes` of decoded body**, counted while decoding. The request asks for
  one content coding itself (`Accept-Encoding: gzip`); the answer may use that one or none.
  Stacked codings (`gzip, gzip`) and codings not asked for (deflate, br, anything else) are
  refused before a byte is decoded. gzip is inflated from the raw bytes (httpx's `aiter_raw`)
  by a streamed decoder whose every step yields at most DECODE_STEP bytes, and the event loop
  gets its turn between steps: 1 GiB of zeros in 1 MB of gzip costs one DECODE_STEP past the
  limit, never the gigabyte. The raw (compressed) body is held to the same limit.
- **No redirects**: a 3xx is an `http_status` error like any other non-2xx.
- **Every failure is a FetchError with a closed-set reason** (exporter/labels.py ErrorReason) and
  a message that names the URL without the password of its userinfo (it reaches /status and the
  logs). JSON bodies are parsed within a depth limit (exporter/snapshot/limits.py).

A GET that got no answer because its kept-alive connection was closed under it is sent once
more, on a new connection (the request never reached the server: uvicorn, which serves SGLang
and vLLM, closes a connection after 5 s idle, the default poll interval). Other methods are
never sent twice.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, ParamSpec, TypeVar

import httpx

from exporter.labels import ErrorReason
from exporter.redact import redact_url
from exporter.snapshot.limits import MAX_DEPTH, JsonError, loads

ACCEPT_ENCODING: Final = "gzip"  # the one content coding the sidecar asks for and accepts
DECODE_STEP: Final = 64 * 1024  # decoded bytes per decompression step (about 0.1 ms of CPU)
_IDENTITY: Final = ("", "identity")


class FetchError(Exception):
    def __init__(self, reason: ErrorReason, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one request may cost: seconds in all, decoded body bytes, JSON nesting."""

    deadline: float
    max_bytes: int
    max_depth: int = MAX_DEPTH


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes  # decoded


# Raised when a kept-alive connection turns out closed as the request goes out.
_STALE_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


async def request(client: httpx.AsyncClient, method: str, url: str, bounds: Bounds, *,
                  json: Any = None, headers: dict[str, str] | None = None,
                  statuses: range | tuple[int, ...] = range(200, 300)) -> Response:
    """`method` `url` within `bounds`; the decoded body of an answer whose status is one of
    `statuses` (any 2xx unless told), or a FetchError."""
    shown = redact_url(url)
    sent = httpx.Headers(headers)
    sent["Accept-Encoding"] = ACCEPT_ENCODING
    try:
        async with asyncio.timeout(bounds.deadline):
            try:
                return await _once(client, method, url, bounds, shown, json, sent, statuses)
            except _STALE_CONNECTION:
                if method != "GET":
                    raise
                return await _once(client, method, url, bounds, shown, json, sent, statuses)
    except TimeoutError:
        raise FetchError(ErrorReason.TIMEOUT,
                         f"no complete response from {shown} in {bounds.deadline}s") from None
    except _BodyError as exc:
        raise _fetch_error(exc.cause, shown) from None
    except httpx.HTTPError as exc:
        raise _fetch_error(exc, shown) from None
    except FetchError:
        raise
    except Exception as exc:  # httpx.InvalidURL, a header httpx refuses: still a closed reason
        raise FetchError(ErrorReason.OTHER, f"{shown}: {type(exc).__name__}") from None


async def request_json(client: httpx.AsyncClient, method: str, url: str, bounds: Bounds, *,
                       json: Any = None, headers: dict[str, str] | None = None,
                       statuses: range | tuple[int, ...] = range(200, 300)) -> Any:
    """`request`, its body parsed as JSON within `bounds.max_depth` (a `decode` FetchError)."""
    resp = await request(client, method, url, bounds, json=json, headers=headers,
                         statuses=statuses)
    try:
        return await off_loop_if_large(len(resp.body), loads, resp.body, bounds.max_depth)
    except JsonError as exc:
        raise FetchError(ErrorReason.DECODE, f"{redact_url(url)}: {exc}", resp.status) from None


async def bounded_get(client: httpx.AsyncClient, url: str, bounds: Bounds) -> Response:
    return await request(client, "GET", url, bounds)


INLINE_BYTES: Final = 64 * 1024
P = ParamSpec("P")
R = TypeVar("R")


async def off_loop_if_large(size: int, func: Callable[P, R], *args: P.args,
                            **kwargs: P.kwargs) -> R:
    """CPU work bounded by the body size limit: a large (possibly hostile) body is handled in a
    thread so /metrics keeps answering; a small one inline, where the hand-off costs more."""
    if size <= INLINE_BYTES:
        return func(*args, **kwargs)
    return await asyncio.to_thread(func, *args, **kwargs)


def _fetch_error(exc: httpx.HTTPError, shown: str) -> FetchError:
    if isinstance(exc, httpx.TimeoutException):
        return FetchError(ErrorReason.TIMEOUT, f"timeout from {shown}: {type(exc).__name__}")
    if isinstance(exc, httpx.DecodingError):
        return FetchError(ErrorReason.DECODE, f"undecodable body from {shown}: {exc}")
    if isinstance(exc, httpx.TransportError):
        return FetchError(ErrorReason.CONNECT, f"cannot reach {shown}: {type(exc).__name__}")
    return FetchError(ErrorReason.OTHER, f"{shown}: {type(exc).__name__}")


class _BodyError(Exception):
    """A transport error after the response head arrived: not retried (the server answered)."""

    def __init__(self, cause: httpx.HTTPError) -> None:
        super().__init__(str(cause))
        self.cause = cause


async def _once(client: httpx.AsyncClient, method: str, url: str, bounds: Bounds, shown: str,
                json: Any, headers: httpx.Headers, statuses: range | tuple[int, ...]
                ) -> Response:
    """One request; an error while reading the body is a _BodyError (the server answered)."""
    async with client.stream(method, url, json=json, headers=headers, follow_redirects=False,
                             timeout=bounds.deadline) as resp:
        status = resp.status_code
        if status not in statuses:
            raise FetchError(ErrorReason.HTTP_STATUS, f"HTTP {status} from {shown}", status)
        gzip = _coding(resp.headers.get_list("content-encoding", split_commas=True), shown,
                       status)
        declared = resp.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > bounds.max_bytes:
            raise FetchError(ErrorReason.TOO_LARGE, f"{shown} declares {declared} bytes, over "
                             f"the {bounds.max_bytes}-byte limit", status)
        body = _Body(bounds.max_bytes, shown, status, gzip)
        if resp.is_stream_consumed:
            # Only an in-process transport (tests' httpx.MockTransport) hands over a response
            # already read, and decoded by httpx: nothing came over a network.
            body = _Body(bounds.max_bytes, shown, status, False)
            await body.feed(resp.content)
            return Response(status, body.done())
        try:
            async for chunk in resp.aiter_raw():
                await body.feed(chunk)
        except httpx.HTTPError as exc:
            raise _BodyError(exc) from None
        return Response(status, body.done())


def _coding(codings: list[str], shown: str, status: int) -> bool:
    """True for gzip, False for none; a FetchError for anything else (never echoes the value)."""
    named = [c.strip().lower() for c in codings if c.strip()]
    if all(c in _IDENTITY for c in named):
        return False
    if named == [ACCEPT_ENCODING]:
        return True
    what = "stacked content codings" if len(named) > 1 else "a content coding"
    raise FetchError(ErrorReason.DECODE, f"{shown} answered with {what} not asked for "
                     f"(asked: {ACCEPT_ENCODING} or none)", status)


class _Body:
    """The decoded body, held to `limit` bytes while it is decoded."""

    def __init__(self, limit: int, shown: str, status: int, gzip: bool) -> None:
        self.limit, self.shown, self.status = limit, shown, status
        self.raw_size = 0
        self.out = bytearray()
        # wbits 31: a gzip member with its header and CRC checked.
        self.decoder = zlib.decompressobj(wbits=31) if gzip else None

    def _too_large(self, what: str) -> FetchError:
        return FetchError(ErrorReason.TOO_LARGE,
                          f"{self.shown} sent over the {self.limit}-byte limit{what}", self.status)

    def _undecodable(self, why: str) -> FetchError:
        return FetchError(ErrorReason.DECODE, f"undecodable gzip body from {self.shown}: {why}",
                          self.status)

    async def feed(self, chunk: bytes) -> None:
        self.raw_size += len(chunk)
        if self.raw_size > self.limit:
            raise self._too_large("" if self.decoder is None else " (compressed)")
        if self.decoder is None:
            self.out += chunk
            return
        data = chunk
        while True:
            if self.decoder.eof:
                if data or self.decoder.unused_data:
                    raise self._undecodable("data after the end of the gzip stream")
                return
            try:
                piece = self.decoder.decompress(data, DECODE_STEP)
            except zlib.error as exc:
                raise self._undecodable(str(exc)) from None
            self.out += piece
            if len(self.out) > self.limit:
                raise self._too_large(" (decoded)")
            if self.decoder.unused_data:  # only ever set past the end of the stream
                raise self._undecodable("data after the end of the gzip stream")
            data = self.decoder.unconsumed_tail
            if not data and len(piece) < DECODE_STEP:
                return  # this chunk is decoded; more output needs more input
            await asyncio.sleep(0)  # a step's worth of CPU at most between two turns of the loop

    def done(self) -> bytes:
        if self.decoder is not None and not self.decoder.eof:
            raise self._undecodable("the gzip stream is cut short")
        return bytes(self.out)
