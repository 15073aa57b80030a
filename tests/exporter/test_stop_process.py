"""The real `serve` process stops promptly when asked, and no sink or stuck thread holds it:
a stderr pipe nobody reads, an NVML device-list call that hangs, SIGHUP as SIGTERM."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.durable import DirectoryHeld, DirectoryLock
from exporter.logs import MAX_QUEUED_LINES
from exporter.stop import STOP_GRACE
from tests.helpers import missing
from tools.fake_nvml import FakeConfig, build, find_compiler, find_header
from tools.harness import free_port

pytestmark = pytest.mark.e2e


def _get(port: int, path: str, timeout: float = 10.0) -> tuple[int, bytes, float]:
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read(), time.perf_counter() - t0
    finally:
        conn.close()


@contextlib.contextmanager
def _serve(tmp_path: Path, *extra: str, stderr: int | None = None,
           env: dict[str, str] | None = None, nvml: bool = False
           ) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--engine-url",
         f"http://127.0.0.1:{free_port()}", "--listen", f"127.0.0.1:{port}", "--state-dir",
         str(tmp_path / "state"), "--poll-interval", "0.2", "--log-format", "json",
         *(() if nvml else ("--no-nvml",)), *extra],
        stdout=subprocess.DEVNULL, stderr=log if stderr is None else stderr,
        env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "serve exited"
            with contextlib.suppress(OSError, http.client.HTTPException):
                if _get(port, "/readyz", 2)[0] == 200:
                    break
            assert time.monotonic() < deadline, "serve not ready"
            time.sleep(0.1)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals) -> tuple[int, float]:
    t0 = time.monotonic()
    proc.send_signal(sig)
    rc = proc.wait(STOP_GRACE + 20)
    return rc, time.monotonic() - t0


def _healthz_yardstick(port: int) -> float:
    """The slowest of ten /healthz answers of this process on this machine, before the fault."""
    return max(_get(port, "/healthz")[2] for _ in range(10))


def test_a_stderr_pipe_nobody_reads_holds_neither_answers_nor_the_stop(tmp_path: Path) -> None:
    """Debug lines for every refused request fill the pipe (64 KiB) and the log queue; logging
    drops and counts instead of blocking the event loop."""
    token = tmp_path / "token"
    token.write_text("stop-Token-0123456789abcdef\n")
    with _serve(tmp_path, "--log-level", "debug", "--events-token-file", str(token),
                stderr=subprocess.PIPE) as (proc, port):
        yardstick = _healthz_yardstick(port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(MAX_QUEUED_LINES + 1000):  # each logs auth_missing (debug)
            conn.request("POST", "/restore/events", body=b"{}")
            conn.getresponse().read()
        conn.close()
        slowest = max(_get(port, "/healthz")[2] for _ in range(20))
        time.sleep(0.5)  # a poll cycle publishes the count
        status, body, _ = _get(port, "/metrics")
        dropped = [line for line in body.decode().splitlines()
                   if line.startswith("helios_exporter_log_lines_dropped_total ")]
        peak = _peak_rss_mib(proc.pid)
        rc, took = _stop(proc, signal.SIGTERM)
    print(f"healthz slowest {slowest:.3f}s (yardstick {yardstick:.3f}s), peak RSS {peak:.1f} MiB,"
          f" stop {took:.2f}s, {dropped}")
    assert status == 200 and dropped and float(dropped[0].split()[1]) > 0
    assert slowest < max(1.0, 20 * yardstick)
    assert rc == 0 and took < STOP_GRACE


def test_sighup_stops_gracefully(tmp_path: Path) -> None:
    with _serve(tmp_path) as (proc, _):
        rc, took = _stop(proc, signal.SIGHUP)
    log = (tmp_path / "serve.log").read_text()
    assert rc == 0 and took < STOP_GRACE
    assert '"signal": "SIGHUP"' in log and '"event": "sidecar_stopped"' in log


def test_a_hung_nvml_device_list_call_does_not_hold_the_stop(tmp_path: Path) -> None:
    header, compiler = find_header(), find_compiler()
    if header is None or compiler is None:
        missing(f"the fake NVML needs nvml.h ({header}) and a C compiler ({compiler})")
    library = build(tmp_path / "fake-nvml", header=header, compiler=compiler)
    config = tmp_path / "gpus.conf"
    FakeConfig(config).write(count=2, hang="nvmlDeviceGetCount_v2", hang_ms=120_000)
    env = {"LD_LIBRARY_PATH": str(library.parent), "FAKE_NVML_CONFIG": str(config)}
    with _serve(tmp_path, "--nvml-timeout", "0.5", env=env, nvml=True) as (proc, port):
        yardstick = _healthz_yardstick(port)
        time.sleep(1.0)  # the device-list call is stuck now (reported hung every poll)
        _, body, _ = _get(port, "/metrics")
        assert b'helios_exporter_source_up{source="nvml"} 0.0' in body
        peak = _peak_rss_mib(proc.pid)
        rc, took = _stop(proc, signal.SIGTERM)
    log = (tmp_path / "serve.log").read_text()
    print(f"stop {took:.2f}s, peak RSS {peak:.1f} MiB, healthz yardstick {yardstick:.3f}s")
    assert rc == 0 and took < STOP_GRACE, log[-2000:]
    assert '"event": "threads_stuck_at_stop"' in log
    lock = DirectoryLock(tmp_path / "state")  # released: another sidecar may start now
    try:
        lock.acquire()
    except DirectoryHeld:
        pytest.fail("the state directory is still locked")
    lock.release()
