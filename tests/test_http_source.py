"""The engine GET over a real socket: a kept-alive connection the engine closed while idle is
retried once on a new connection; nothing else is.

uvicorn (which serves SGLang and vLLM) closes a connection after 5 s idle, the default poll
interval: a poll that reuses the connection as the engine closes it got no answer, and the
request never reached the engine. Before the retry, that cost a failed poll (offload metrics
missing, the source down) every so often on a healthy engine.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest

from exporter.labels import ErrorReason
from exporter.sources.http import FetchError, bounded_get

Handler = Callable[[socket.socket, int], None]  # one connection, its index


def read_request(conn: socket.socket) -> bool:
    """Read one request head; False when the client closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return False
        data += chunk
    return True


def answer(conn: socket.socket, body: bytes, length: int | None = None) -> None:
    head = (f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n\r\n").encode()
    conn.sendall(head + body)


@contextmanager
def engine(handler: Handler) -> Iterator[tuple[str, list[int]]]:
    """A server on 127.0.0.1 running `handler` per connection, one at a time; yields its URL
    and the indexes of the connections it accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()
    connections: list[int] = []

    def serve() -> None:
        index = 0
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            connections.append(index)
            with conn:
                conn.settimeout(5)
                handler(conn, index)
            index += 1

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/metrics", connections
    finally:
        stop.set()
        thread.join(5)
        server.close()


def fetch_twice(url: str) -> list[bytes | FetchError]:
    async def go() -> list[bytes | FetchError]:
        out: list[bytes | FetchError] = []
        async with httpx.AsyncClient(timeout=5) as client:
            for _ in range(2):
                try:
                    out.append((await bounded_get(client, url, 1 << 20)).body)
                except FetchError as exc:
                    out.append(exc)
        return out

    return asyncio.run(go())


def test_a_connection_closed_while_idle_is_retried_once_on_a_new_one() -> None:
    def handler(conn: socket.socket, index: int) -> None:
        if index == 0:
            assert read_request(conn)
            answer(conn, b"first")
            read_request(conn)  # the reused connection's request: closed without an answer
            return
        assert read_request(conn)
        answer(conn, b"second")

    with engine(handler) as (url, connections):
        assert fetch_twice(url) == [b"first", b"second"]
        assert len(connections) == 2  # the retry went out on a new connection


def test_an_engine_that_hangs_up_on_every_request_fails_after_one_retry() -> None:
    def handler(conn: socket.socket, index: int) -> None:
        read_request(conn)

    with engine(handler) as (url, connections):
        results = fetch_twice(url)
        assert all(isinstance(r, FetchError) and r.reason == ErrorReason.CONNECT for r in results)
        assert len(connections) == 4  # two attempts per GET, never more


@pytest.mark.parametrize("sent", [0, 10])
def test_an_answer_cut_short_is_not_sent_again(sent: int) -> None:
    """The engine answered (the head, part of the body) and then hung up: the request reached
    it, so it fails the poll instead of being sent twice."""
    def handler(conn: socket.socket, index: int) -> None:
        read_request(conn)
        answer(conn, b"x" * sent, length=100)

    with engine(handler) as (url, connections):
        results = fetch_twice(url)
        assert all(isinstance(r, FetchError) and r.reason == ErrorReason.CONNECT for r in results)
        assert len(connections) == 2  # one connection per GET: no retry
