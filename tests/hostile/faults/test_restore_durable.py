"""An answer is a promise: restore events against real `serve` processes whose disk fills, whose
state file cannot be read, whose lock cannot be taken and whose wall clock steps.

Each test measures the sidecar's peak RSS (VmHWM) and the slowest `/healthz` it answered during
the fault (`assert_serving` bounds both and checks that the poll cycles go on). The full disk is
real: the LD_PRELOAD shim of test_restore_faults.py makes write() to a temporary state file fail
with ENOSPC while a flag file exists, for the sidecar process only.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporter.restore.store import STATE_FILE, StateStore
from exporter.restore.window import RestoreState
from tests.e2e.procs import start_sidecar, wait_for
from tests.hostile.faults.faultlib import FAST, status
from tests.hostile.faults.test_restore_faults import (
    assert_kept,
    assert_serving,
    peak_rss_kib,
    post_event,
    shim,
    sidecar,
)
from tests.hostile.stub import Case, HostileEngine, json_body, sane_snapshot
from tools.harness import families, sample

pytestmark = pytest.mark.e2e  # every test here starts a process

HEALTHZ_WITHIN = 1.0  # seconds: the slowest /healthz answer allowed during a fault, unless...
HEALTHZ_LOAD = 4.0  # ...the same sidecar before the fault, on a busy machine, took a 4th of it


def healthz_bound(url: str) -> float:
    """The yardstick, measured on the same process and machine at the start of the test."""
    return max(HEALTHZ_WITHIN, HEALTHZ_LOAD * slowest_healthz(url))


def slowest_healthz(url: str, times: int = 10) -> float:
    worst = 0.0
    for _ in range(times):
        t0 = time.monotonic()
        assert httpx.get(url + "/healthz", timeout=5).status_code == 200
        worst = max(worst, time.monotonic() - t0)
        time.sleep(0.05)
    return worst


def report(pid: int, worst: float) -> None:
    """The figures docs/hardening.md quotes (shown with `pytest -s`)."""
    print(f"peak RSS {peak_rss_kib(pid) / 1024:.1f} MiB, slowest /healthz {worst:.3f} s")


def metric(url: str, name: str, **labels: str) -> float | None:
    value: float | None = sample(families(httpx.get(url + "/metrics", timeout=5).text), name,
                                 **labels)
    return value


def engine_as(eng: HostileEngine, generation: str, admission: str, inflight: int) -> None:
    obj = sane_snapshot(generation)
    obj["admission"] = {**obj.get("admission", {}), "state": admission,
                        "inflight_requests": inflight}
    obj.pop("started_at", None)
    eng.case = Case(f"{generation}-{admission}-{inflight}", snapshot=json_body(obj))


def test_a_full_disk_answers_503_and_the_retry_applies_once_space_returns(
        engine: HostileEngine, tmp_path: Path) -> None:
    """On a full disk an event was answered 200 `accepted` (`persisted: false`), its retry
    `duplicate`, and a SIGKILL before space returned lost it. Now: 503 with Retry-After, nothing
    changed, the id unused; the retry after space returns is accepted and survives a SIGKILL."""
    state_dir = tmp_path / "state"
    full = tmp_path / "disk-full"
    engine_as(engine, "g-1", "open", 2)
    proc, url = sidecar(engine, state_dir, tmp_path,
                        env={"LD_PRELOAD": str(shim(tmp_path)), "SHIM_ENOSPC_FLAG": str(full)})
    try:
        wait_for(lambda: status(url)["engine_up"], 10, "engine up", proc)
        bound = healthz_bound(url)
        full.touch()
        for _ in range(2):  # the retry while the disk is still full: 503 again, not `duplicate`
            resp = post_event(url, "d-1", "drain_started")
            assert resp.status_code == 503, resp.text
            assert resp.headers["Retry-After"] == "1"
            body = resp.json()
            assert body["accepted"] is False and body["duplicate"] is False
            assert body["window_open"] is False and "No space left" in body["detail"]
        worst = slowest_healthz(url)
        restore = status(url)["restore"]
        assert restore["window"] is None and "No space left" in restore["last_state_write_error"]
        assert metric(url, "helios_restore_events", event="drain_started",
                      result="unavailable") == 2
        assert (metric(url, "helios_restore_state_write_errors") or 0) >= 2
        on_disk = StateStore(state_dir).load()  # the engine first seen, before the disk filled
        assert on_disk is not None and on_disk.window is None and on_disk.event_ids == ()
        full.unlink()  # space returns
        resp = post_event(url, "d-1", "drain_started")
        assert resp.status_code == 200, resp.text
        assert resp.json()["accepted"] is True and resp.json()["window_open"] is True
        start = resp.json()["window_start"]
        assert_serving(proc, url)
        report(proc.pid, worst)
        assert worst < bound, (worst, bound)
        assert proc.popen is not None
        proc.popen.send_signal(signal.SIGKILL)  # acknowledged: on disk, whatever comes next
        proc.popen.wait(10)
    finally:
        proc.stop()
    saved = StateStore(state_dir).load()
    assert saved is not None and saved.window is not None and saved.window.start == start
    assert saved.event_ids == ("d-1",)
    again, url = sidecar(engine, state_dir, tmp_path, name="again")
    try:
        assert status(url)["restore"]["window"]["start"] == start
        assert post_event(url, "d-1", "drain_started").json()["duplicate"] is True
    finally:
        again.stop()


def test_a_held_state_file_is_never_judged_as_empty(
        engine: HostileEngine, seed: tuple[Path, RestoreState], tmp_path: Path) -> None:
    """The file on disk cannot be read at start (a directory at its path): its open window was
    invisible (window open 0, no deadlines), `abort` was refused with "no window is open" and
    `drain_started` accepted with a later start. Now events are answered 503, the window is
    unknown (a series that pages) and nothing is written over the path; once the file is back
    it is merged and the retries are judged against its window."""
    state_dir, state = seed
    path = state_dir / STATE_FILE
    kept = tmp_path / "kept.json"
    path.rename(kept)
    path.mkdir()
    proc, url = sidecar(engine, state_dir, tmp_path)
    try:
        bound = healthz_bound(url)
        wait_for(lambda: metric(url, "helios_restore_window_unknown") == 1, 10, "unknown", proc)
        # Unknown, not closed: no window series at all (was helios_restore_window_open 0).
        assert metric(url, "helios_restore_window_open") is None
        assert metric(url, "helios_restore_deadline_timestamp_seconds") is None
        for event_id, kind in (("e-3", "abort"), ("e-4", "drain_started")):
            resp = post_event(url, event_id, kind)
            assert resp.status_code == 503, resp.text
            assert resp.headers["Retry-After"] == "1"
            assert "cannot be read" in resp.json()["detail"]
        worst = slowest_healthz(url)
        assert path.is_dir() and not list(path.iterdir())  # nothing written over it
        assert status(url)["restore"]["state_file_held"]
        path.rmdir()
        kept.rename(path)
        wait_for(lambda: metric(url, "helios_restore_window_unknown") == 0, 10, "merged", proc)
        win = status(url)["restore"]["window"]
        assert state.window is not None and win["start"] == state.window.start  # the file's
        # The retries, judged against the window on file: drain_started refused (one is open),
        # an id of the file a duplicate.
        assert post_event(url, "e-4", "drain_started").status_code == 409
        assert post_event(url, "e-1", "drain_started").json()["duplicate"] is True
        assert_kept(state_dir, state, proc, url)
        report(proc.pid, worst)
        assert worst < bound, (worst, bound)
    finally:
        proc.stop()


def test_numbers_the_writer_cannot_write_in_unknown_fields_never_stop_the_sidecar(
        engine: HostileEngine, seed: tuple[Path, RestoreState], tmp_path: Path) -> None:
    """A state file from a later release, with NaN, Infinity and a 5000-digit integer in fields
    this one does not know: NaN failed every poll cycle (the encoder refuses what the reader
    took), the integer moved the whole file aside and lost the window. Now they are dropped and
    counted, the window on file stands, events are acknowledged (on disk) and the file written
    back holds none of them."""
    state_dir, state = seed
    path = state_dir / STATE_FILE
    doc = json.loads(path.read_text())
    doc["state"]["x_later_nan"] = "@NAN@"
    doc["state"]["window"]["x_later_int"] = "@INT@"
    doc["state"]["x_later_list"] = "@LIST@"
    path.write_text(json.dumps(doc).replace('"@NAN@"', "NaN").replace('"@INT@"', "9" * 5000)
                    .replace('"@LIST@"', "[1, Infinity]"))
    proc, url = sidecar(engine, state_dir, tmp_path)
    try:
        bound = healthz_bound(url)
        assert metric(url, "helios_restore_window_open") == 1  # the file's window
        assert state.window is not None
        assert status(url)["restore"]["window"]["start"] == state.window.start
        cycles = status(url)["poll_cycles"]
        wait_for(lambda: status(url)["poll_cycles"] > cycles + 2, 20, "cycles go on", proc)
        resp = post_event(url, "e-later", "abort")
        assert resp.status_code == 200, resp.text
        worst = slowest_healthz(url)
        written = path.read_text()
        assert "NaN" not in written and "Infinity" not in written and "9" * 100 not in written
        assert "e-later" in written  # the acknowledged event is on disk
        assert not list(state_dir.glob("*.corrupt-*"))  # nothing moved aside
        report(proc.pid, worst)
        assert worst < bound, (worst, bound)
    finally:
        proc.stop()


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_lock_that_cannot_be_taken_refuses_to_start(
        engine: HostileEngine, seed: tuple[Path, RestoreState], tmp_path: Path,
        kind: str) -> None:
    """A `.lock` that exists but cannot be locked turned the one-sidecar rule off silently."""
    state_dir, _ = seed
    lock = state_dir / ".lock"
    if kind == "directory":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    before = (state_dir / STATE_FILE).read_bytes()
    proc, _ = start_sidecar(engine.url, tmp_path / "refused.log", *FAST, state_dir=state_dir,
                            ready=None)
    assert proc.popen is not None
    rc = proc.popen.wait(30)
    assert rc == 2, proc.tail()
    lines = [json.loads(ln) for ln in proc.log.read_text().splitlines() if ln.startswith("{")]
    refused = [ln for ln in lines if ln.get("event") == "state_dir_lock_unusable"]
    assert refused and "cannot be locked" in refused[0]["error"], proc.tail()
    assert (state_dir / STATE_FILE).read_bytes() == before


@pytest.mark.parametrize("offset", [4300, -3600])
def test_a_wall_clock_step_during_a_window_changes_nothing_observed(
        engine: HostileEngine, tmp_path: Path, offset: int) -> None:
    """A +4300 s step during a 10 s window recorded 3 lost requests and a failed
    `drained_admission`; a -3600 s step a duration of -3592 s, judged in time. The window is
    timed on the monotonic clock while this process watches it."""
    state_dir = tmp_path / "state"
    clock = tmp_path / "offset"
    clock.write_text("0")
    engine_as(engine, "g-1", "open", 3)
    proc, url = sidecar(engine, state_dir, tmp_path,
                        env={"LD_PRELOAD": str(shim(tmp_path)),
                             "SHIM_CLOCK_OFFSET_FILE": str(clock)})
    try:
        wait_for(lambda: status(url)["engine_up"], 10, "engine up", proc)
        opened = post_event(url, "d-1", "drain_started").json()
        t0 = time.monotonic()
        engine_as(engine, "g-1", "draining", 3)
        win: Any = lambda: status(url)["restore"]["window"]  # noqa: E731
        wait_for(lambda: win()["last_inflight"] == 3 and win()["drained"] is False, 10,
                 "draining, 3 in flight", proc, interval=0.05)
        clock.write_text(str(offset))
        cycles = status(url)["poll_cycles"]
        wait_for(lambda: status(url)["poll_cycles"] > cycles + 3, 10, "polls after the step",
                 proc)
        engine_as(engine, "g-1", "draining", 0)
        wait_for(lambda: win()["drained"], 10, "drained", proc, interval=0.05)
        engine_as(engine, "g-2", "open", 0)
        last = wait_for(lambda: status(url)["restore"]["last_window"], 10, "closed", proc,
                        interval=0.05)
        took = time.monotonic() - t0
        assert last["start"] == opened["window_start"]
        assert last["outcome"] == "in_time" and last["lost_requests"] == 0, last
        assert 0 <= last["duration_seconds"] <= took + 1, (last, took)
        assert status(url)["restore"]["checks"]["drained_admission"] is True
        saved = StateStore(state_dir).load()
        assert saved is not None and saved.last_window is not None
        assert saved.last_window.end >= saved.last_window.start  # type: ignore[operator]
        assert_serving(proc, url)
    finally:
        proc.stop()
