"""uvicorn's httptools protocol with deadlines for slow clients, the connection cap and TLS.

uvicorn has a keep-alive timeout but no deadline for a request to arrive: a client that connects
and sends half a request head (or nothing at all) holds its connection, and a file descriptor, for
as long as it likes. This subclass, passed to uvicorn as `http=`, adds:

- a read deadline (`--http-read-timeout`): the whole request, head and body, must arrive within
  it, counted from the accepted connection (TLS handshake included) or, on a kept-alive
  connection, from the first byte of the next request (an empty line before it included: the
  parser skips those without beginning a request, and uvicorn stops the idle timer on any byte);
- a write deadline of the same length while the response is stuck in a full send buffer (a client
  that stops reading);
- a request head over `HTTP_MAX_HEAD_BYTES` answered 431 (httptools itself has no limit), then
  what the client still sends read and dropped for up to `HEAD_LINGER_SECONDS` before the close,
  so that the kernel does not reset the connection over unread bytes and lose the answer;
- the idle keep-alive timeout counted; every connection admitted through `ConnectionGuard`;
- TLS per connection: the plain connection is accepted first (so the cap and the deadline cover
  the handshake too), then upgraded with `loop.start_tls` using the web configuration's current
  `SSLContext`, so a changed certificate or client CA applies to the next connection.

Connections closed for those reasons are closed at once (`abort`): a client that stopped reading
would otherwise keep the descriptor until its buffered response drained, that is, never.
Accepted sockets keep TCP_NODELAY (set by asyncio from the listening socket, exporter/sidecar.py).

uvicorn has no public setting for any of this (no request deadline, no head limit under
httptools, and `limit_concurrency` refuses at the cap where the guard sheds), and an ASGI
middleware only sees a request once its head has arrived. So this is a private hook:
`HttpToolsProtocol` is not uvicorn's public interface. It is written for `UVICORN_VERSION`, which
pyproject.toml pins exactly; `UVICORN_HOOKS` lists what it overrides or reads of uvicorn's
class, and tests/exporter/web/test_protocol_hook.py holds each of them, and the behaviour above, to the
installed uvicorn, so that an upgrade fails a test rather than a slow client's deadline.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any

import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from exporter.defaults import HTTP_MAX_HEAD_BYTES
from exporter.web.connections import ConnectionGuard
from exporter.web.tls import TlsSettings, san_allowed

log = structlog.get_logger("helios_exporter.http")

UVICORN_VERSION = "0.54.0"
# What the subclass overrides of HttpToolsProtocol (the httptools parser callbacks and uvicorn's
# own keep-alive and response callbacks among them) and the attributes of uvicorn's it reads.
UVICORN_HOOKS = ("connection_made", "connection_lost", "data_received", "pause_writing",
                 "resume_writing", "timeout_keep_alive_handler", "on_message_begin",
                 "on_headers_complete", "on_message_complete", "on_response_complete")
UVICORN_ATTRIBUTES = ("loop", "transport", "cycle", "timeout_keep_alive",
                      "timeout_keep_alive_task")


def _raw_response(status: str, body: bytes = b"") -> bytes:
    return (f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


REFUSED = _raw_response("503 Service Unavailable",
                        b"too many open connections to the sidecar; retry shortly\n")
HEAD_TOO_LARGE = _raw_response("431 Request Header Fields Too Large")
# How long the rest of an oversized head is read and dropped after the 431 (at most: a client
# that reads the answer and closes ends it at once).
HEAD_LINGER_SECONDS = 2.0


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """Bound to one server by `protocol_class()`."""

    guard: ConnectionGuard
    tls: Callable[[], TlsSettings | None]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn's Config types it as whole seconds; call_later takes any.
        self.timeout_keep_alive = self.guard.idle_timeout  # type: ignore[assignment]
        self._raw: asyncio.Transport | None = None  # the TCP connection (under TLS, if any)
        self._admitted = False
        self._shut = False  # closed by the sidecar: not a handshake failure
        self._read_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._awaiting_head = True
        self._head_bytes = 0
        self._in_request = False  # a request has begun and not fully arrived
        self._handshake: asyncio.Task[None] | None = None
        self._serving = False  # uvicorn's connection_made ran: HTTP is spoken
        # Under TLS, a request sent with the handshake's last flight is delivered before
        # `start_tls` returns: it waits here for uvicorn's connection_made.
        self._early: list[bytes] = []
        self._lingering = False  # answered 431: what the client still sends is read and dropped

    # -- connection ------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        settings = self.tls()
        if not self.guard.admit(self):
            if settings is None:
                transport.write(REFUSED)
            transport.close()
            return
        self._admitted = True
        self._raw = transport
        self._read_deadline = self.loop.call_later(self.guard.read_timeout, self._expired,
                                                   "slow_request")
        if settings is None:
            self._serving = True
            super().connection_made(transport)
            return
        # Nothing may be read before the handshake takes over the connection.
        transport.pause_reading()
        self._handshake = self.loop.create_task(self._start_tls(transport, settings))

    async def _start_tls(self, raw: asyncio.Transport, settings: TlsSettings) -> None:
        try:
            tls = await self.loop.start_tls(raw, self, settings.context, server_side=True,
                                            ssl_handshake_timeout=self.guard.read_timeout)
        except (OSError, ssl.SSLError, TimeoutError, RuntimeError) as exc:
            if not self._shut:
                self.guard.tls_handshake_failures += 1
                log.debug("tls_handshake_failed", client=_peer(raw), error=type(exc).__name__)
            if not raw.is_closing():
                raw.abort()
            return
        if tls is None or raw.is_closing():
            return
        if settings.allowed_sans is not None and not san_allowed(
                tls.get_extra_info("peercert"), settings.allowed_sans):
            self.guard.tls_handshake_failures += 1
            log.info("tls_client_rejected", client=_peer(raw),
                     reason="no allowed SAN in the client certificate")
            raw.abort()
            return
        self._serving = True
        super().connection_made(tls)
        early, self._early = self._early, []
        for data in early:
            if not tls.is_closing():
                self.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadlines()
        if self._admitted:
            self.guard.lost(self)
        if not self._serving:  # refused, or the TLS handshake never completed
            return
        super().connection_lost(exc)

    def shed(self) -> None:
        self._close_now()

    def _close_now(self) -> None:
        self._shut = True
        self._cancel_deadlines()
        if self._raw is not None and not self._raw.is_closing():
            self._raw.abort()

    # -- deadlines -------------------------------------------------------------------------------
    def _expired(self, reason: str) -> None:
        self._read_deadline = self._write_deadline = None
        if self._raw is not None and not self._raw.is_closing():
            self.guard.closing(reason)
            self._close_now()

    def _cancel_deadlines(self) -> None:
        for handle in (self._read_deadline, self._write_deadline):
            if handle is not None:
                handle.cancel()
        self._read_deadline = self._write_deadline = None

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.guard.read_timeout, self._expired,
                                                        "slow_reader")

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            self.guard.closing("idle")
            # The TCP connection itself: under TLS a polite close would wait for the client's
            # close_notify, up to 30 s.
            if self._raw is not None:
                self._raw.close()

    # -- requests --------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if not self._serving:
            self._early.append(data)
            return
        if self._lingering:
            return
        if self._awaiting_head:
            self._head_bytes += len(data)
        super().data_received(data)
        # uvicorn cancels the idle timer on any byte, and the parser skips the empty lines before
        # a request without beginning one: bytes that leave no request complete nor being served
        # (a CRLF on a kept-alive connection) must start the read deadline, or a client could
        # hold the connection with one CRLF. Armed only then: a request that comes in one piece
        # (a scrape) costs no timer.
        serving = self.cycle is not None and not self.cycle.response_complete
        if (self._in_request or not serving) and self._read_deadline is None \
                and not self.transport.is_closing():
            self._read_deadline = self.loop.call_later(self.guard.read_timeout, self._expired,
                                                       "slow_request")
            self.guard.waiting(self)
        if (self._awaiting_head and self._head_bytes > HTTP_MAX_HEAD_BYTES
                and not self.transport.is_closing()):
            self.guard.closing("head_too_large")
            self.transport.write(HEAD_TOO_LARGE)
            self._linger()

    def _linger(self) -> None:
        """After the 431, read and drop what the client still sends for a moment, then close.
        Closing with its bytes unread would make the kernel reset the connection, and the reset
        can destroy the answer before the client reads it (nginx's lingering close)."""
        self._cancel_deadlines()
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the answer is all there is: the client reads to EOF
        self._read_deadline = self.loop.call_later(HEAD_LINGER_SECONDS, self._end_linger)

    def _end_linger(self) -> None:
        self._read_deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_request = True
        self.guard.waiting(self)

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_request = False
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None
        self._awaiting_head = True
        self._head_bytes = 0
        self.guard.busy(self)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # armed: nothing pipelined, now idle
            self.guard.idle(self)


def protocol_class(guard: ConnectionGuard,
                   tls: Callable[[], TlsSettings | None]) -> type[GuardedHttpToolsProtocol]:
    """The protocol for one server: uvicorn instantiates it per connection with its own
    arguments, so the guard and the TLS settings travel as class attributes."""
    return type("SidecarHttpProtocol", (GuardedHttpToolsProtocol,),
                {"guard": guard, "tls": staticmethod(tls)})


def _peer(transport: asyncio.BaseTransport) -> str | None:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else None
