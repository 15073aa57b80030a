"""A hostile engine: a real HTTP/1.1 server on 127.0.0.1 built on raw sockets.

Raw sockets, not http.server, so that a case can send exactly the bytes it wants: truncated
bodies, invalid chunked encoding, bogus status lines, a slow drip of one byte at a time, a stall.
The server runs in threads of the test process; the test switches `engine.case` between polls of
a sidecar that runs as a separate process. Every response closes its connection, so one case
never leaks bytes into the next.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import socketserver
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.helpers import contract_example

SNAPSHOT = "/debug/offload/snapshot"
METRICS = "/metrics"
PREFLIGHT = "/v1/completions"  # what a sidecar's --preflight-direct-url names here
SANE_GENERATION = "g-sane-0001"

# A behaviour writes one response (or none) to a connected socket. `stop` is set at teardown so
# that endless behaviours (drips, stalls) end.
Behaviour = Callable[[socket.socket, threading.Event], None]

SANE_METRICS = """\
# HELP helios:prompt_tokens_total Prompt tokens.
# TYPE helios:prompt_tokens_total counter
helios:prompt_tokens_total{model_name="m"} 100
# TYPE helios:num_running_reqs gauge
helios:num_running_reqs{model_name="m"} 2
# TYPE helios:e2e_request_latency_seconds histogram
helios:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 1
helios:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 2
helios:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 3
helios:e2e_request_latency_seconds_sum{model_name="m"} 1.5
helios:e2e_request_latency_seconds_count{model_name="m"} 3
"""


def sane_snapshot(generation: str = SANE_GENERATION) -> dict[str, Any]:
    snap = contract_example()
    snap["generation"] = generation
    return snap


REASONS = {
    100: "Continue", 101: "Switching Protocols", 102: "Processing", 200: "OK", 204: "No Content",
    301: "Moved Permanently", 302: "Found", 307: "Temporary Redirect", 400: "Bad Request",
    401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests",
    500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Timeout",
}


def head(status: int, headers: dict[str, str] | None = None, length: int | None = None,
         close: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Odd')}"]
    if close:
        lines.append("Connection: close")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def raw(data: bytes) -> Behaviour:
    """Send these exact bytes, then close."""

    def run(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(data)

    return run


def respond(status: int, body: bytes | str, headers: dict[str, str] | None = None,
            content_length: bool = True) -> Behaviour:
    """A well-framed response; without Content-Length the body ends when the connection closes."""
    data = body.encode() if isinstance(body, str) else body
    return raw(head(status, headers, len(data) if content_length else None) + data)


def json_body(obj: Any) -> Behaviour:
    return respond(200, json.dumps(obj), {"Content-Type": "application/json"})


def wait_closed(conn: socket.socket, stop: threading.Event, limit: float = 30.0) -> None:
    """Hold the connection until the client closes it (or teardown, or `limit` seconds)."""
    conn.settimeout(0.1)
    deadline = time.monotonic() + limit
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            if conn.recv(4096) == b"":
                return
        except TimeoutError:
            continue
        except OSError:
            return


def stall(prefix: bytes = b"") -> Behaviour:
    """Send `prefix` (perhaps nothing, perhaps the headers), then never another byte."""

    def run(conn: socket.socket, stop: threading.Event) -> None:
        if prefix:
            conn.sendall(prefix)
        wait_closed(conn, stop)

    return run


def drip(prefix: bytes, payload: bytes, interval: float = 0.1, limit: float = 30.0) -> Behaviour:
    """Send `prefix`, then `payload` one byte every `interval` seconds, repeating, until the
    client hangs up: no single read ever waits longer than `interval`."""

    def run(conn: socket.socket, stop: threading.Event) -> None:
        if prefix:
            conn.sendall(prefix)
        deadline = time.monotonic() + limit
        i = 0
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                conn.sendall(payload[i % len(payload) : i % len(payload) + 1])
            except OSError:
                return
            i += 1
            time.sleep(interval)

    return run


def flood(prefix: bytes, chunk: bytes, total: int) -> Behaviour:
    """Send `prefix`, then `chunk` repeatedly up to `total` bytes or until the client hangs up."""

    def run(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(prefix)
        sent = 0
        while sent < total and not stop.is_set():
            try:
                conn.sendall(chunk)
            except OSError:
                return
            sent += len(chunk)

    return run


def each_time(make: Callable[[int], Behaviour]) -> Behaviour:
    """A different response for every request: `make(n)` for the n-th one."""
    counter = itertools.count()

    def run(conn: socket.socket, stop: threading.Event) -> None:
        make(next(counter))(conn, stop)

    return run


def read_head(conn: socket.socket, limit: int = 65536) -> bytes:
    """A request head (up to `limit` bytes); b"" when the client closed before sending one."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < limit:
        chunk = conn.recv(4096)
        if not chunk:
            return b""
        data += chunk
    return data


def keep_alive_then_hang_up(body: bytes) -> Behaviour:
    """Answer 200 keeping the connection open, then read the next request on it and close
    without an answer: an idle connection the server closed just as the client reused it."""

    def run(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head(200, length=len(body), close=False) + body)
        conn.settimeout(5.0)
        read_head(conn)

    return run


def hang_up() -> Behaviour:
    """Read the request and close without a byte of response."""

    def run(conn: socket.socket, stop: threading.Event) -> None:
        return

    return run


SANE_SNAPSHOT_BEHAVIOUR = json_body(sane_snapshot())
# A preflight answer that passes a sidecar's --preflight-max-tokens 4.
SANE_PREFLIGHT_BEHAVIOUR = json_body({"usage": {"completion_tokens": 4}})
SANE_METRICS_BEHAVIOUR = respond(200, SANE_METRICS, {"Content-Type": "text/plain; version=0.0.4"})


@dataclass(frozen=True)
class Case:
    """One hostile engine behaviour and what the sidecar must make of it.

    `snapshot_reason` / `metrics_reason`: the closed-set reason the source must report, or None
    when the payload is usable and the source must stay up. `markers`: strings planted in the
    input that must never reach /metrics. `check`: extra assertions on the parsed /metrics.
    """

    name: str
    snapshot: Behaviour = SANE_SNAPSHOT_BEHAVIOUR
    metrics: Behaviour = SANE_METRICS_BEHAVIOUR
    preflight: Behaviour = SANE_PREFLIGHT_BEHAVIOUR
    snapshot_reason: str | None = None
    metrics_reason: str | None = None
    markers: tuple[str, ...] = ()
    check: Callable[[dict[str, Any]], None] | None = None
    doc: str = ""


SANE = Case("sane", doc="the contract example with a fixed generation")


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(5.0)
        data = b""
        with contextlib.suppress(OSError):
            data = read_head(conn)
        if not data:
            return
        parts = data.split(b" ", 2)
        path = parts[1].decode("latin-1") if len(parts) > 1 else ""
        engine = self.server.engine
        case = engine.case
        engine.record(case.name, path)
        _read_body(conn, data)
        if path == SNAPSHOT:
            behaviour = case.snapshot
        elif path == METRICS:
            behaviour = case.metrics
        elif path == PREFLIGHT:
            behaviour = case.preflight
        elif path == "/health":
            behaviour = respond(200, "ok")
        else:
            behaviour = respond(404, "not found")
        conn.settimeout(None)
        with contextlib.suppress(OSError):
            behaviour(conn, engine.stop)
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)


def _read_body(conn: socket.socket, data: bytes) -> None:
    """Read what is left of a request body (a preflight POST) before answering: a socket
    closed with unread bytes is reset, and the client may lose the answer before reading it."""
    head_part, _, got = data.partition(b"\r\n\r\n")
    length = 0
    for line in head_part.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    left = min(length, 1 << 20) - len(got)
    with contextlib.suppress(OSError):
        while left > 0:
            chunk = conn.recv(min(left, 65536))
            if not chunk:
                return
            left -= len(chunk)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    engine: HostileEngine


@dataclass
class HostileEngine:
    """The server; `case` is read at each request, so assigning it switches the behaviour."""

    case: Case = SANE
    stop: threading.Event = field(default_factory=threading.Event)
    served: Counter[tuple[str, str]] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: _Server | None = None

    def record(self, case: str, path: str) -> None:
        with self._lock:
            self.served[(case, path)] += 1

    def count(self, case: str, path: str) -> int:
        with self._lock:
            return self.served[(case, path)]

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HostileEngine:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.engine = self
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         name="hostile-engine", daemon=True).start()
        return self

    def close(self) -> None:
        self.stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextlib.contextmanager
def running_engine() -> Iterator[HostileEngine]:
    engine = HostileEngine().start()
    try:
        yield engine
    finally:
        engine.close()
