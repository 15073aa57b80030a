"""Bounded HTTP GET against the engine: timeouts, no redirects, a response size limit."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from exporter.labels import ErrorReason
from exporter.redact import redact_url


class FetchError(Exception):
    def __init__(self, reason: ErrorReason, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes


# Raised when a kept-alive connection turns out closed as the request goes out: the server
# hung up an idle connection at the moment the client reused it (uvicorn, which serves SGLang
# and vLLM, closes after 5 s idle: the default poll interval). The request never reached the
# engine, so it is sent again once, on a new connection.
_STALE_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


async def bounded_get(client: httpx.AsyncClient, url: str, max_bytes: int) -> Response:
    """GET `url`, reading at most `max_bytes` of body; any non-2xx is a FetchError.

    Redirects are not followed: an engine that redirects its debug endpoint is misconfigured,
    and following them invites loops. The client's timeouts bound each phase; the caller bounds
    the whole call (a slow drip of bytes never times out a read on its own). Messages name the
    URL without the password of its userinfo (they reach /status and the logs). A request that
    got no answer because its connection was closed under it is sent once more, on a new
    connection (a GET: nothing happened at the engine); an engine that hangs up on every
    request still fails the poll.
    """
    shown = redact_url(url)
    try:
        try:
            return await _get(client, url, max_bytes, shown)
        except _STALE_CONNECTION:
            return await _get(client, url, max_bytes, shown)
    except _BodyError as exc:
        raise _fetch_error(exc.cause, shown) from None
    except httpx.HTTPError as exc:
        raise _fetch_error(exc, shown) from None


def _fetch_error(exc: httpx.HTTPError, shown: str) -> FetchError:
    if isinstance(exc, httpx.TimeoutException):
        return FetchError(ErrorReason.TIMEOUT, f"timeout from {shown}: {type(exc).__name__}")
    if isinstance(exc, httpx.DecodingError):
        return FetchError(ErrorReason.DECODE, f"undecodable body from {shown}: {exc}")
    if isinstance(exc, httpx.TransportError):
        return FetchError(ErrorReason.CONNECT, f"cannot reach {shown}: {type(exc).__name__}")
    return FetchError(ErrorReason.OTHER, f"{shown}: {type(exc).__name__}")


class _BodyError(Exception):
    """A transport error after the response head arrived: not retried (the engine answered)."""

    def __init__(self, cause: httpx.HTTPError) -> None:
        super().__init__(str(cause))
        self.cause = cause


async def _get(client: httpx.AsyncClient, url: str, max_bytes: int, shown: str) -> Response:
    """One GET; an error while reading the body is a _BodyError (the engine answered)."""
    async with client.stream("GET", url, follow_redirects=False) as resp:
        if not 200 <= resp.status_code < 300:
            raise FetchError(
                ErrorReason.HTTP_STATUS, f"HTTP {resp.status_code} from {shown}", resp.status_code
            )
        declared = resp.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise FetchError(
                ErrorReason.TOO_LARGE,
                f"{shown} declares {declared} bytes, over the {max_bytes}-byte limit",
                resp.status_code,
            )
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(
                        ErrorReason.TOO_LARGE,
                        f"{shown} sent over the {max_bytes}-byte limit",
                        resp.status_code,
                    )
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise _BodyError(exc) from None
        return Response(resp.status_code, b"".join(chunks))
