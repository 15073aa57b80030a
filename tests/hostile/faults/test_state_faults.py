"""The state directory fails, and the sidecar is stopped mid-poll.

We run as root, so chmod cannot make a directory unwritable. Two robust stand-ins instead:
- "read-only": --state-dir lies under a regular file, so mkdir and open fail (ENOTDIR);
- "full": the sidecar runs with RLIMIT_FSIZE at 64 bytes and SIGXFSZ ignored, so writing the state
  file fails with EFBIG after 64 bytes, exactly as ENOSPC would mid-write. Its log goes to a pipe,
  which the limit does not cover.
Either way the write must fail loudly (counter, /status, log line) and the sidecar keep working.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporter.restore.store import StateStore
from exporter.stop import STOP_GRACE
from tests.e2e.procs import ROOT, free_port, http_ok, start_sidecar, wait_for
from tests.hostile.faults.faultlib import FAST, scrape, status
from tests.hostile.stub import (
    METRICS,
    SANE,
    SNAPSHOT,
    Case,
    HostileEngine,
    json_body,
    running_engine,
    sane_snapshot,
    stall,
)
from tools.harness import sample, serve_args

pytestmark = pytest.mark.e2e  # every test here starts a process


def draining_case() -> Case:
    snap = sane_snapshot()
    snap["admission"] = {"state": "draining", "inflight_requests": 2}
    return Case("draining", snapshot=json_body(snap))


@pytest.fixture
def engine() -> Iterator[HostileEngine]:
    with running_engine() as eng:
        yield eng


def open_window(engine: HostileEngine, url: str, alive: Any) -> dict[str, Any]:
    wait_for(lambda: http_ok(url + "/readyz"), 30, "sidecar ready", None)
    wait_for(lambda: status(url)["engine_up"], 10, "engine up", None, interval=0.05)
    engine.case = draining_case()
    win: dict[str, Any] = wait_for(lambda: status(url)["restore"]["window"], 10, "window open",
                                   None, interval=0.05)
    alive()
    return win


def assert_write_failed_loudly(url: str, log: str, errno_text: str) -> None:
    fams = scrape(url)
    assert (sample(fams, "helios_restore_state_write_errors") or 0) >= 1
    # The window lives on in memory and is exported although it could not be persisted.
    assert sample(fams, "helios_restore_window_open") == 1.0
    assert sample(fams, "helios_restore_window_start_timestamp_seconds") is not None
    restore = status(url)["restore"]
    assert restore["state_write_errors"] >= 1
    assert errno_text in restore["last_state_write_error"]
    assert "restore_state_write_failed" in log


def test_state_dir_under_a_file_fails_loudly_and_keeps_serving(
    engine: HostileEngine, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a regular file where the state directory's parent should be\n")
    proc, url = start_sidecar(engine.url, tmp_path / "sidecar.log", *FAST, "--down-grace", "3600",
                              state_dir=blocker / "state", ready=None)
    try:
        open_window(engine, url, lambda: None)
        wait_for(lambda: "restore_state_write_failed" in proc.log.read_text(), 5, "log line",
                 proc)
        assert_write_failed_loudly(url, proc.log.read_text(), "NotADirectoryError")
        # It keeps polling and follows the engine; the window closes in memory.
        engine.case = SANE
        wait_for(lambda: status(url)["restore"]["window"] is None, 10, "window closed", proc,
                 interval=0.05)
        scrape(url)
    finally:
        engine.case = SANE
        rc = proc.stop()
    assert rc == 0, proc.tail()  # the final write at shutdown fails too, and is only logged


def test_state_file_too_large_for_the_disk_fails_loudly(
    engine: HostileEngine, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    # Set the limit in a tiny launcher that then execs the sidecar: SIG_IGN survives exec, and
    # no preexec_fn runs in this (threaded) test process.
    launcher = ("import os, resource, signal, sys\n"
                "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
                "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
                "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")
    args = serve_args(engine.url, port, state_dir, *FAST, "--down-grace", "3600")
    popen = subprocess.Popen([sys.executable, "-c", launcher, *args[1:]], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(raw.decode(errors="replace") for raw in popen.stdout or ()),
        daemon=True)
    reader.start()

    def alive() -> None:
        assert popen.poll() is None, "".join(lines)

    try:
        open_window(engine, url, alive)
        wait_for(lambda: any("restore_state_write_failed" in ln for ln in lines), 5, "log line",
                 None)
        assert_write_failed_loudly(url, "".join(lines), "File too large")
        # Nothing torn was left behind: no state file, and no temporary file either (the
        # sidecar retries the write every poll, so one may exist for an instant: a leaked one
        # stays, and fails this).
        assert not (state_dir / "restore-state.json").exists()
        # (.lock: the sidecar's lock on its state directory, holding its pid.)
        wait_for(lambda: [p.name for p in state_dir.iterdir()] == [".lock"], 5,
                 "no temporary state file", None)
        alive()
        assert httpx.get(url + "/healthz", timeout=3).status_code == 200
    finally:
        popen.send_signal(signal.SIGTERM)
        rc = popen.wait(15)
        reader.join(5)
    assert rc == 0, "".join(lines[-20:])


def test_sigterm_during_a_poll_exits_cleanly_with_state_written(
    engine: HostileEngine, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    # A long request timeout: the poll is certainly in flight when SIGTERM arrives.
    proc, url = start_sidecar(engine.url, tmp_path / "sidecar.log", *FAST, "--down-grace", "3600",
                              "--timeout", "10", state_dir=state_dir, ready=None)
    try:
        win = open_window(engine, url, lambda: None)
        hang = Case("stall", snapshot=stall(), metrics=stall())
        engine.case = hang
        wait_for(lambda: engine.count("stall", SNAPSHOT) and engine.count("stall", METRICS), 10,
                 "a poll stuck on the engine", proc, interval=0.02)
        time.sleep(0.1)
        assert proc.popen is not None
        t0 = time.monotonic()
        proc.popen.send_signal(signal.SIGTERM)
        rc = proc.popen.wait(10)
        took = time.monotonic() - t0
    finally:
        engine.case = SANE
        proc.stop()
    assert rc == 0, proc.tail()
    # Within the stop's own grace (exporter/stop.py), past which the process would leave with 1.
    assert took < STOP_GRACE, f"shutdown took {took:.1f}s with a poll in flight"
    log = proc.log.read_text()
    assert "sidecar_stopped" in log and "Traceback" not in log
    saved = StateStore(state_dir).load()
    assert saved is not None and saved.window is not None
    assert saved.window.start == win["start"]
    assert saved.window.incumbent is not None
    assert saved.window.incumbent.generation == sane_snapshot()["generation"]
    # The file is the complete document, nothing half-written next to it.
    assert sorted(p.name for p in state_dir.iterdir()) == [".lock", "restore-state.json"]
    json.loads((state_dir / "restore-state.json").read_text())
