"""The real `helios-exporter serve` process: listening, keep-alive scrapes, its log stream."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.procs import start_sidecar
from tools.harness import free_port, serve_args


@contextlib.contextmanager
def _serve(tmp_path: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """`serve` against an engine port nobody listens on (every poll fails, the sidecar serves
    regardless), with stdout and stderr in files; stopped with SIGTERM on the way out."""
    err, out = tmp_path / "serve.stderr", tmp_path / "serve.stdout"
    proc, url = start_sidecar(f"http://127.0.0.1:{free_port()}", out, "--poll-interval", "0.5",
                              *extra, state_dir=tmp_path / "state", err=err, ready=30)
    assert proc.popen is not None
    try:
        yield proc.popen, int(url.rsplit(":", 1)[1]), err
    finally:
        proc.stop(timeout=15)


@pytest.mark.e2e
def test_busy_listen_port_is_a_clear_error_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(serve_args("http://127.0.0.1:1", port, tmp_path),
                              capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert '"event": "listen_failed"' in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.e2e
def test_keep_alive_scrapes_do_not_wait_for_delayed_acks(tmp_path: Path) -> None:
    """Prometheus scrapes over one keep-alive connection. If accepted connections lack
    TCP_NODELAY, the body written after the headers waits for the client's delayed ACK: about
    40 ms per answer on Linux, whatever the machine's speed. The yardstick: the same scrape on a
    fresh connection each time, measured now (a new connection has no delayed ACK to wait for,
    and pays a handshake): a stalled keep-alive scrape takes 40 ms more than it."""
    with _serve(tmp_path, "--log-format", "json") as (_, port, _err):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.connect()
            local = conn.sock.getsockname()
            took = []
            for _ in range(50):
                t0 = time.perf_counter()
                conn.request("GET", "/metrics")
                resp = conn.getresponse()
                body = resp.read()
                took.append(time.perf_counter() - t0)
                assert resp.status == 200 and b"helios_restore_window_open" in body
                assert conn.sock.getsockname() == local, "the server closed the connection"
        finally:
            conn.close()
        fresh = []
        for _ in range(20):
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/metrics")
            conn.getresponse().read()
            conn.close()
            fresh.append(time.perf_counter() - t0)
    median_ms = statistics.median(took) * 1000
    yardstick_ms = statistics.median(fresh) * 1000
    assert median_ms < yardstick_ms + 20, (
        f"median {median_ms:.1f} ms per keep-alive scrape, {yardstick_ms:.1f} ms on a fresh "
        "connection: accepted sockets lack TCP_NODELAY?")


def test_accepted_connections_get_tcp_nodelay() -> None:
    """The mechanism behind the test above, without a clock: asyncio sets TCP_NODELAY on the
    connections a listening socket accepts only when that socket says it is TCP (IPPROTO_TCP)."""
    import asyncio

    from exporter.sidecar import _bind

    async def accepted_nodelay() -> int:
        sock = _bind("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                accepted = transport.get_extra_info("socket")
                seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        try:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            value = await asyncio.wait_for(seen, 10)
            writer.close()
            return value
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(accepted_nodelay()) != 0


# One logfmt pair: key=bare-value or key="quoted \" value" (a bare value has no space, quote or =).
_LOGFMT_PAIR = r'[A-Za-z_][A-Za-z0-9_.]*=(?:"(?:[^"\\]|\\.)*"|[^\s"=]*)'
_LOGFMT_LINE = re.compile(rf"{_LOGFMT_PAIR}(?: {_LOGFMT_PAIR})*")


def _logfmt(line: str) -> dict[str, str]:
    assert _LOGFMT_LINE.fullmatch(line), f"not logfmt: {line!r}"
    pairs = re.findall(r'([A-Za-z_][A-Za-z0-9_.]*)=("(?:[^"\\]|\\.)*"|[^\s"=]*)', line)
    return {k: v[1:-1].replace('\\"', '"') if v.startswith('"') else v for k, v in pairs}


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", ["json", "logfmt"])
def test_every_stderr_line_is_in_the_log_format(tmp_path: Path, fmt: str) -> None:
    """uvicorn's own warning for a request it cannot parse (raw bytes that are not HTTP) used to
    reach stderr as plain text through the standard library's last-resort handler."""
    with _serve(tmp_path, "--log-format", fmt) as (proc, port, err):
        for garbage in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
                        b"NOT HTTP AT ALL\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                raw.sendall(garbage)
                with contextlib.suppress(OSError):
                    raw.recv(4096)  # uvicorn answers 400 and closes
        deadline = time.monotonic() + 10
        while "Invalid HTTP request received." not in err.read_text(errors="replace"):
            assert time.monotonic() < deadline, "uvicorn logged nothing for a malformed request"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    lines = err.read_text().splitlines()
    parse = json.loads if fmt == "json" else _logfmt
    events = [parse(line) for line in lines]  # fails on the first line that is not `fmt`
    assert all(isinstance(e, dict) and e.get("event") and e.get("level") for e in events)
    invalid = [e for e in events if e["event"] == "Invalid HTTP request received."]
    assert invalid and all(e["logger"] == "uvicorn.error" and e["level"] == "warning"
                           for e in invalid)
    assert {"sidecar_starting", "sidecar_stopped"} <= {e["event"] for e in events}
    assert (tmp_path / "serve.stdout").read_bytes() == b""
