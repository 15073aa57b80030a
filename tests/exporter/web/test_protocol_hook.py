"""exporter/web/protocol.py subclasses uvicorn's private HttpToolsProtocol: the hook is held here
to the installed uvicorn, so that an upgrade fails these tests rather than a deadline in
production. The version is the pinned one; every method it overrides and attribute it reads
exists with the signature it was written for; and, in this process on real sockets of
127.0.0.1 (no child process), each thing it adds still happens: the read deadline, the 431 and
its lingering close, the idle timeout counted, the CRLF that uvicorn's idle timer ignores, the
stalled reader, the cap that sheds a waiting connection. (The same behaviour against a real
`serve` process, with 5,000 connections, is tests/exporter/web/test_slow_clients.py.)"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from exporter.defaults import HTTP_MAX_HEAD_BYTES
from exporter.web import protocol
from exporter.web.connections import ConnectionGuard
from tests.conftest import ROOT

READ_TIMEOUT = 0.3

# What each hook's signature was in the uvicorn the subclass was written for.
SIGNATURES = {
    "__init__": ["self", "config", "server_state", "app_state", "_loop"],
    "connection_made": ["self", "transport"],
    "connection_lost": ["self", "exc"],
    "data_received": ["self", "data"],
    "pause_writing": ["self"],
    "resume_writing": ["self"],
    "timeout_keep_alive_handler": ["self"],
    "on_message_begin": ["self"],
    "on_headers_complete": ["self"],
    "on_message_complete": ["self"],
    "on_response_complete": ["self"],
}


def test_the_installed_uvicorn_is_the_version_the_hook_was_written_for() -> None:
    assert importlib.metadata.version("uvicorn") == protocol.UVICORN_VERSION
    assert f'"uvicorn=={protocol.UVICORN_VERSION}"' in (ROOT / "pyproject.toml").read_text()


def test_every_hook_is_uvicorns_with_the_signature_it_was_written_for() -> None:
    assert set(SIGNATURES) - {"__init__"} == set(protocol.UVICORN_HOOKS)
    for name, params in SIGNATURES.items():
        assert name in vars(HttpToolsProtocol), f"HttpToolsProtocol.{name} is gone"
        assert list(inspect.signature(vars(HttpToolsProtocol)[name]).parameters) == params, name
    # What exporter/sidecar.py's uvicorn.Server subclass overrides.
    assert list(inspect.signature(uvicorn.Server.startup).parameters) == ["self", "sockets"]
    assert callable(getattr(uvicorn.Server, "capture_signals", None))


def test_the_attributes_it_reads_are_uvicorns() -> None:
    config = uvicorn.Config(_app, log_config=None, lifespan="off", ws="none")
    cls = protocol.protocol_class(ConnectionGuard(4, READ_TIMEOUT, READ_TIMEOUT), lambda: None)

    async def made() -> Any:
        return cls(config=config, server_state=ServerState(), app_state={})

    conn = asyncio.run(made())
    missing = [a for a in protocol.UVICORN_ATTRIBUTES if not hasattr(conn, a)]
    assert missing == []
    assert isinstance(conn.loop, asyncio.AbstractEventLoop)


# -- the behaviour, through uvicorn's real parser and response cycle --------------------------
BODY = b"ok\n"
big_body = b""


async def _app(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
               send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    body = big_body if scope["path"] == "/big" else BODY
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


Scenario = Callable[[ConnectionGuard, int], Awaitable[None]]


def serve(scenario: Scenario, max_connections: int = 8, idle_timeout: float = READ_TIMEOUT) -> \
        ConnectionGuard:
    """Run `scenario(guard, port)` against the guarded protocol on a free port of 127.0.0.1."""
    guard = ConnectionGuard(max_connections, READ_TIMEOUT, idle_timeout)
    config = uvicorn.Config(_app, log_config=None, access_log=False, lifespan="off", ws="none")
    config.load()
    state = ServerState()
    cls = protocol.protocol_class(guard, lambda: None)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(
            lambda: cls(config=config, server_state=state, app_state={}), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            await asyncio.wait_for(scenario(guard, port), 10)
        finally:
            server.close()
            for conn in list(state.connections):
                conn.shutdown()
            await server.wait_closed()

    asyncio.run(main())
    return guard


REQUEST = b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """Seconds until the server closed the connection (EOF or reset), reading what comes."""
    started = time.monotonic()
    try:
        while await asyncio.wait_for(reader.read(65536), seconds):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - started


async def _until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Poll the server's bookkeeping (it runs on this loop) until `condition` holds."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # noqa: ASYNC110 (no event to wait on)
        await asyncio.sleep(0.02)


async def _answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return head + await reader.readexactly(length)


def test_a_scrape_is_answered_and_the_idle_connection_closed_and_counted() -> None:
    async def scenario(guard: ConnectionGuard, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        answer = await _answer(reader)
        assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(BODY)
        assert (guard.accepted, guard.open) == (1, 1)
        await _closed_within(reader, 30)  # closed at all: why is counted (asserted below)
        writer.close()

    guard = serve(scenario)
    assert guard.closed["idle"] == 1 and guard.open == 0


def test_a_request_head_that_never_completes_is_closed_at_the_read_deadline() -> None:
    async def scenario(guard: ConnectionGuard, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        took = await _closed_within(reader, 30)
        assert took > READ_TIMEOUT * 0.8  # not before the deadline; why is counted below
        writer.close()

    assert serve(scenario, idle_timeout=60).closed["slow_request"] == 1


def test_an_empty_line_on_a_kept_alive_connection_starts_the_read_deadline() -> None:
    """uvicorn stops its idle timer on any byte and its parser skips the CRLF: without the hook
    the connection would be held for good (the idle timeout here is a minute)."""
    async def scenario(guard: ConnectionGuard, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        await _answer(reader)
        writer.write(b"\r\n")
        await _closed_within(reader, 30)  # closed at all: why is counted (asserted below)
        writer.close()

    guard = serve(scenario, idle_timeout=60)
    assert guard.closed["slow_request"] == 1 and guard.closed["idle"] == 0


def test_a_head_over_the_limit_gets_431_and_a_lingering_close() -> None:
    async def scenario(guard: ConnectionGuard, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * HTTP_MAX_HEAD_BYTES)
        answer = await asyncio.wait_for(reader.read(65536), 5)
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
        writer.write(b"b" * 65536)  # still sending: read and dropped, no reset
        await writer.drain()
        assert await asyncio.wait_for(reader.read(65536), 5) == b""  # EOF: the answer was all
        writer.close()

    assert serve(scenario, idle_timeout=60).closed["head_too_large"] == 1


def test_a_client_that_stops_reading_is_closed_at_the_write_deadline() -> None:
    global big_body
    big_body = b"x" * (64 * 1024 * 1024)  # far more than the socket buffers hold

    async def scenario(guard: ConnectionGuard, port: int) -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024)
        writer.transport.pause_reading()  # never reads the answer
        writer.write(b"GET /big HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        await _until(lambda: guard.closed["slow_reader"] > 0)
        writer.close()

    try:
        guard = serve(scenario, idle_timeout=60)
    finally:
        big_body = b""
    assert guard.closed["slow_reader"] == 1 and guard.open == 0


def test_at_the_cap_a_connection_waiting_for_its_request_makes_room() -> None:
    async def scenario(guard: ConnectionGuard, port: int) -> None:
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
        await _until(lambda: guard.open == 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST)
        assert (await _answer(reader)).startswith(b"HTTP/1.1 200 OK")
        await _closed_within(idle_reader, 30)  # shed to make room: `evicted`, below
        idle_writer.close()
        writer.close()

    guard = serve(scenario, max_connections=1, idle_timeout=60)
    assert guard.closed["evicted"] == 1 and guard.accepted == 2


@pytest.mark.parametrize("name", protocol.UVICORN_HOOKS)
def test_each_hook_overrides_uvicorns(name: str) -> None:
    """The subclass defines it itself: a rename in uvicorn would leave it never called."""
    assert name in vars(protocol.GuardedHttpToolsProtocol)
