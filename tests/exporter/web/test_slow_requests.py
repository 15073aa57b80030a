"""The real `serve` process against slow or broken requests on single connections: slowloris
drips, empty lines on a kept-alive connection, a body that never comes, a broken chunked body,
idle keep-alives, a head over 64 KiB. The sidecar runs with `--http-read-timeout 2`
(tests/exporter/web/slowproc.py); floods of connections are in test_slow_clients.py.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import time
from pathlib import Path

import pytest

from tests.exporter.web.slowproc import READ_TIMEOUT, SLACK, self_metrics, serve
from tests.exporter.web.tlsproc import logged_errors
from tools.harness import Procs


@pytest.mark.parametrize("kept_alive", [False, True])
def test_a_slowloris_drip_is_cut_at_the_deadline_however_fast_it_drips(
        procs: Procs, kept_alive: bool) -> None:
    """Bytes keep arriving, but the head never completes: the deadline is for the whole head,
    also for the next request on a kept-alive connection (counted from its first byte)."""
    proc, port = serve(procs)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if kept_alive:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: s\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        time.sleep(READ_TIMEOUT + 0.5)  # idle, not slow: the idle timeout (75 s) applies
    t0 = time.monotonic()
    sock.sendall(b"GET /metrics HTTP/1.1\r\n")
    closed_after = None
    with contextlib.suppress(OSError):
        for i in range(100):
            sock.sendall(f"X-Drip-{i}: {i}\r\n".encode())
            time.sleep(0.2)
    closed_after = time.monotonic() - t0
    sock.close()
    assert READ_TIMEOUT - 0.1 <= closed_after <= READ_TIMEOUT + SLACK
    assert self_metrics(port)["closed_slow_request"] == 1
    assert logged_errors(proc) == []


@pytest.mark.parametrize("every_second", [False, True])
def test_empty_lines_on_a_kept_alive_connection_are_under_the_read_deadline(
        procs: Procs, every_second: bool) -> None:
    """The parser skips empty lines before a request without beginning one, and uvicorn stops
    the idle timer on any byte: one CRLF after a response must not hold the connection for
    good. Cut by the read deadline (2 s), before the idle timeout (4 s) would have."""
    proc, port = serve(procs, "--http-idle-timeout", "4")
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: s\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    t0 = time.monotonic()
    sock.sendall(b"\r\n")
    sock.settimeout(1.0 if every_second else READ_TIMEOUT + SLACK)
    closed_after = None
    while time.monotonic() - t0 < READ_TIMEOUT + SLACK:
        try:
            if sock.recv(1) == b"":
                closed_after = time.monotonic() - t0
                break
        except TimeoutError:
            with contextlib.suppress(OSError):
                sock.sendall(b"\r\n")
        except OSError:
            closed_after = time.monotonic() - t0
            break
    sock.close()
    assert closed_after is not None, "still open: the empty lines disabled both timeouts"
    assert closed_after >= READ_TIMEOUT - 0.1
    metrics = self_metrics(port)
    assert metrics["closed_slow_request"] == 1 and metrics["closed_idle"] == 0, metrics
    assert logged_errors(proc) == []


def test_a_request_body_that_never_comes(procs: Procs, tmp_path: Path) -> None:
    """Cut at the deadline; the route reading the body sees the client gone: no traceback."""
    token = tmp_path / "token"
    token.write_text("t0ken")
    proc, port = serve(procs, "--events-token-file", str(token))
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.monotonic()
    sock.sendall(b"POST /restore/events HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer t0ken\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\"")
    sock.settimeout(READ_TIMEOUT + SLACK + 5)
    with contextlib.suppress(OSError):
        while sock.recv(4096):
            pass
    took = time.monotonic() - t0
    sock.close()
    assert READ_TIMEOUT - 0.1 <= took <= READ_TIMEOUT + SLACK
    assert self_metrics(port)["closed_slow_request"] == 1
    assert logged_errors(proc) == []


def test_a_broken_chunked_body_is_answered_400_without_a_traceback(
        procs: Procs, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken")
    proc, port = serve(procs, "--events-token-file", str(token))
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /restore/events HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer t0ken\r\n"
                 b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"5\r\n{\"id\"\r\n")
    time.sleep(0.3)  # the head and the first chunk reach the route before the broken one
    sock.sendall(b"zz\r\n")  # not a chunk size
    answer = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(4096):
            answer += chunk
    sock.close()
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    time.sleep(0.5)
    assert logged_errors(proc) == []


def test_idle_keep_alive_connections_time_out(procs: Procs) -> None:
    proc, port = serve(procs, "--http-idle-timeout", "1")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/healthz")
    assert conn.getresponse().read()
    sock = conn.sock
    t0 = time.monotonic()
    sock.settimeout(10)
    assert sock.recv(1) == b""  # closed by the server
    took = time.monotonic() - t0
    conn.close()
    assert 0.9 <= took <= 1 + SLACK
    assert self_metrics(port)["closed_idle"] == 1
    assert logged_errors(proc) == []


def test_a_request_head_over_64_kib_is_refused(procs: Procs) -> None:
    proc, port = serve(procs)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: s\r\n")
    answer = b""
    with contextlib.suppress(OSError):
        for _ in range(20):
            sock.sendall(b"X-Big: " + b"a" * 8000 + b"\r\n")
        while chunk := sock.recv(4096):
            answer += chunk
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert self_metrics(port)["closed_head_too_large"] == 1
    assert logged_errors(proc) == []
