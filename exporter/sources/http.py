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


async def bounded_get(client: httpx.AsyncClient, url: str, max_bytes: int) -> Response:
    """GET `url`, reading at most `max_bytes` of body; any non-2xx is a FetchError.

    Redirects are not followed: an engine that redirects its debug endpoint is misconfigured,
    and following them invites loops. The client's timeouts bound each phase; the caller bounds
    the whole call (a slow drip of bytes never times out a read on its own). Messages name the
    URL without the password of its userinfo (they reach /status and the logs).
    """
    shown = redact_url(url)
    try:
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
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(
                        ErrorReason.TOO_LARGE,
                        f"{shown} sent over the {max_bytes}-byte limit",
                        resp.status_code,
                    )
                chunks.append(chunk)
            return Response(resp.status_code, b"".join(chunks))
    except httpx.TimeoutException as exc:
        raise FetchError(ErrorReason.TIMEOUT, f"timeout from {shown}: {type(exc).__name__}") from None
    except httpx.DecodingError as exc:
        raise FetchError(ErrorReason.DECODE, f"undecodable body from {shown}: {exc}") from None
    except httpx.TransportError as exc:
        raise FetchError(ErrorReason.CONNECT, f"cannot reach {shown}: {type(exc).__name__}") from None
    except httpx.HTTPError as exc:
        raise FetchError(ErrorReason.OTHER, f"{shown}: {type(exc).__name__}") from None
