"""The restore state under faults, against real `serve` processes and a real HTTP engine.

Each test starts from a state file that holds everything that must never be lost: an open window
with an exact start and its incumbent, the checks of an earlier judged restore (one failed) and
the ids of accepted events. After the fault, `assert_kept` reads the file and the running sidecar:
the window, its exact start, the incumbent, the checks and the event ids are all still there,
peak RSS (VmHWM) stays under 150 MiB, /metrics answers within 2 s and the poll cycles go on.
The slow disk and the stepped wall clock are real: an LD_PRELOAD library compiled here with the
system's C compiler (as tools/fake_nvml.py builds the fake NVML) makes fsync sleep and shifts
CLOCK_REALTIME by the seconds written in a file, for the sidecar process only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporter.restore.store import STATE_FILE, StateStore
from exporter.restore.window import Bounds, Event, Poll, RestoreState, restarted, step
from exporter.snapshot.parse import snapshot_from_obj
from tests.e2e.procs import Proc, start_sidecar, wait_for
from tests.hostile.faults.faultlib import FAST, status
from tests.hostile.stub import Case, HostileEngine, hang_up, json_body, sane_snapshot

pytestmark = pytest.mark.e2e  # every test here starts a process

TOKEN = "restore-faults-token-0123456789abcdef"
MAX_HWM_KIB = 150 * 1024
SHIM_C = Path(__file__).with_name("preload_shim.c")


# -- the state that must survive ----------------------------------------------------------------
def seeded_state(generation: str, t0: float) -> RestoreState:
    """An engine restored once into the wrong container (container check failed), then the
    same engine draining since t0 + 30 with restore_started: ids e-1, e-2."""
    bounds = Bounds(4200.0, 5400.0, 2.0)

    def snap(gen: str, container: str, admission: str = "open") -> Any:
        obj = sane_snapshot(gen)
        obj["identity"]["container_id"] = container
        obj["admission"] = {**obj.get("admission", {}), "state": admission,
                            "inflight_requests": 1}
        obj.pop("started_at", None)
        return snapshot_from_obj(obj)

    s = RestoreState()
    for inp in (Poll(t0, snap("g-old", "c-old")), Poll(t0 + 1, snap("g-old", "c-old", "draining")),
                Poll(t0 + 2, None), Poll(t0 + 10, None), Poll(t0 + 20, snap(generation, "c-new")),
                Event(t0 + 29, "e-1", "drain_started"),
                Poll(t0 + 30, snap(generation, "c-new", "draining")),
                Event(t0 + 31, "e-2", "restore_started")):
        s = step(s, inp, bounds)
    assert s.window is not None and s.checks.get("container") is False
    return restarted(s)


def draining_engine(engine: HostileEngine, generation: str) -> None:
    obj = sane_snapshot(generation)
    obj["identity"]["container_id"] = "c-new"
    obj["admission"] = {**obj.get("admission", {}), "state": "draining", "inflight_requests": 1}
    obj.pop("started_at", None)
    engine.case = Case("draining", snapshot=json_body(obj))


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def assert_kept(state_dir: Path, seed: RestoreState, proc: Proc, url: str,
                cycle_wait: float = 10.0) -> None:
    """The file keeps the window, its exact start, the incumbent, the checks and the event ids;
    and `assert_serving`."""
    saved = StateStore(state_dir).load()
    assert saved is not None and saved.window is not None and seed.window is not None
    assert saved.window.start == seed.window.start and saved.window.start_exact
    assert saved.window.incumbent == seed.window.incumbent
    assert saved.checks == seed.checks
    assert set(seed.event_ids) <= set(saved.event_ids)
    assert_serving(proc, url, cycle_wait)


def assert_serving(proc: Proc, url: str, cycle_wait: float = 10.0) -> None:
    """Peak RSS (VmHWM) under 150 MiB, /metrics within 2 s, and the poll cycles go on."""
    assert peak_rss_kib(proc.pid) < MAX_HWM_KIB
    t0 = time.monotonic()
    assert httpx.get(url + "/metrics", timeout=5).status_code == 200
    assert time.monotonic() - t0 < 2.0
    cycles = status(url)["poll_cycles"]
    wait_for(lambda: status(url)["poll_cycles"] > cycles + 2, cycle_wait, "polls go on", proc)


def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def sidecar(engine: HostileEngine, state_dir: Path, tmp_path: Path, *extra: str,
            env: dict[str, str] | None = None, name: str = "sidecar") -> tuple[Proc, str]:
    return start_sidecar(engine.url, tmp_path / f"{name}.log", *FAST, "--events-token-file",
                         str(token_file(tmp_path)), "--down-grace", "2", *extra,
                         state_dir=state_dir, name=name, env=env, ready=30)


def post_event(url: str, id_: str, kind: str, token: str = TOKEN) -> httpx.Response:
    # An accepted event is answered once it is on disk: with a slow disk that takes seconds.
    return httpx.post(url + "/restore/events", json={"id": id_, "event": kind},
                      headers={"Authorization": f"Bearer {token}"}, timeout=30)


# -- the faults ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_fifo_or_link_at_the_path_is_held_then_merged(
        engine: HostileEngine, seed: tuple[Path, RestoreState], tmp_path: Path,
        kind: str) -> None:
    """A FIFO hung startup before the first log line, a link was followed: now either is held
    (never read, never written over) while the sidecar serves; the file put back is merged."""
    state_dir, state = seed
    path = state_dir / STATE_FILE
    kept = tmp_path / "kept.json"
    path.rename(kept)
    original = kept.read_bytes()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(kept)
    proc, url = sidecar(engine, state_dir, tmp_path)
    try:
        held = wait_for(lambda: status(url)["restore"]["state_file_held"], 10, "held", proc)
        assert ("a FIFO" if kind == "fifo" else "symbolic link") in held
        # This process opened its own window (the engine drains), but what the file holds is
        # unknown: an event is not judged against it (503, not applied).
        assert post_event(url, "e-3", "restore_started").status_code == 503
        assert kept.read_bytes() == original  # a link is never written through
        assert path.is_symlink() or path.is_fifo()  # ...nor replaced while held
        path.unlink()
        kept.rename(path)
        wait_for(lambda: status(url)["restore"]["state_file_held"] is None, 10, "merged", proc)
        # Judged against the merged window now: restore_started was accepted there (e-2).
        assert post_event(url, "e-3", "restore_started").status_code == 409
        assert_kept(state_dir, state, proc, url)
    finally:
        proc.stop()


def test_an_unknown_field_and_value_are_kept_and_never_cost_the_window(
        engine: HostileEngine, seed: tuple[Path, RestoreState], tmp_path: Path) -> None:
    """A newer release's file: an unknown field at two levels and an unknown cause. Before, the
    whole file was moved aside as corrupt and the open window lost."""
    state_dir, state = seed
    path = state_dir / STATE_FILE
    doc = json.loads(path.read_bytes())
    doc["state"]["planned_by"] = "fleet-controller"
    doc["state"]["window"]["quorum"] = 2
    doc["state"]["window"]["cause"] = "planned_maintenance"
    path.write_text(json.dumps(doc))
    proc, url = sidecar(engine, state_dir, tmp_path)
    try:
        problems = status(url)["restore"]["state_file_problems"]
        assert any("window.cause" in p for p in problems), problems
        assert any("planned_by" in p for p in problems), problems
        assert post_event(url, "e-3", "abort").status_code == 200  # written now...
        written = json.loads(path.read_bytes())["state"]
        assert written["planned_by"] == "fleet-controller"  # ...with the unknown field kept
        assert not list(state_dir.glob("*.corrupt-*"))
        assert_serving(proc, url)
    finally:
        proc.stop()
    # The window of the file was loaded (then aborted by e-3): its exact start and incumbent.
    saved = StateStore(state_dir).load()
    assert saved is not None and saved.last_window is not None and state.window is not None
    assert saved.last_window.start == state.window.start
    assert saved.last_window.incumbent == state.window.incumbent
    assert saved.checks == state.checks and {"e-1", "e-2", "e-3"} <= set(saved.event_ids)


def test_a_second_sidecar_on_the_directory_refuses_to_start(
        engine: HostileEngine, seed: tuple[Path, RestoreState], tmp_path: Path) -> None:
    state_dir, state = seed
    proc, url = sidecar(engine, state_dir, tmp_path)
    try:
        second, _ = start_sidecar(engine.url, tmp_path / "second.log", *FAST, state_dir=state_dir,
                                  ready=None)
        rc = second.popen.wait(30) if second.popen else None
        assert rc == 2, second.tail()
        log = second.log.read_text()
        assert "state_dir_in_use" in log and f'"holder_pid": "{proc.pid}"' in log
        assert_kept(state_dir, state, proc, url)
    finally:
        proc.stop()


def test_window_closed_before_drain_started_strands_nothing(
        engine: HostileEngine, tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    engine.case = Case("sane")
    proc, url = sidecar(engine, state_dir, tmp_path)
    try:
        wait_for(lambda: status(url)["engine_up"], 10, "engine up", proc)
        early = post_event(url, "close-1", "window_closed")
        assert early.status_code == 409 and "no window is open" in early.json()["detail"]
        assert post_event(url, "drain-1", "drain_started").status_code == 200
        again = post_event(url, "close-1", "window_closed")  # the same id, now it closes
        assert again.status_code == 200 and again.json()["window_open"] is False
        saved = StateStore(state_dir).load()
        assert saved is not None and saved.window is None
        assert saved.event_ids == ("drain-1", "close-1")
        assert saved.last_window is not None and saved.last_window.cause == "event"
        assert_serving(proc, url)
    finally:
        proc.stop()


def shim(tmp_path: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("no C compiler (the tests build their LD_PRELOAD shim with it)")
    lib = tmp_path / "shim.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(lib), str(SHIM_C), "-ldl"],
                   check=True)
    return lib


def test_a_slow_disk_never_holds_up_healthz_or_metrics(
        engine: HostileEngine, seed: tuple[Path, RestoreState], tmp_path: Path) -> None:
    """fsync takes 2 s (two per write, a write at every poll inside a window): /healthz took
    3.98 s before (the liveness probe allows 3 s). A poll cycle still waits for its own state
    write (what /status shows is on disk, so a SIGKILL right after never moves the start), so
    /healthz's stale bound must leave a 4 s write the room it has in production (3 intervals of
    5 s plus the 2 s source deadline: 17 s); this test's poll interval is compressed, the bound
    is given back with --healthz-stale-polls."""
    state_dir, state = seed
    proc, url = sidecar(engine, state_dir, tmp_path, "--healthz-stale-polls", "30",
                        env={"LD_PRELOAD": str(shim(tmp_path)), "SHIM_FSYNC_SECONDS": "2"})
    try:
        worst = 0.0  # inside the window every poll writes: 4 s of fsync each
        for _ in range(20):
            t0 = time.monotonic()
            assert httpx.get(url + "/healthz", timeout=5).status_code == 200
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.1)
        assert worst < 1.0, worst
        writes = (state_dir / STATE_FILE).stat().st_mtime_ns
        wait_for(lambda: (state_dir / STATE_FILE).stat().st_mtime_ns != writes, 30,
                 "a write through the slow fsync", proc)
        assert_kept(state_dir, state, proc, url, cycle_wait=40.0)
    finally:
        proc.stop()


def test_a_step_back_of_the_wall_clock_does_not_delay_the_window(
        engine: HostileEngine, tmp_path: Path) -> None:
    """The engine goes away; right after its first failed poll the sidecar's wall clock steps
    back an hour. The window opens after the 2 s grace (monotonic), at the first failed poll's
    wall time; before, it opened an hour late."""
    state_dir = tmp_path / "state"
    offset = tmp_path / "offset"
    offset.write_text("0")
    engine.case = Case("sane")
    proc, url = sidecar(engine, state_dir, tmp_path,
                        env={"LD_PRELOAD": str(shim(tmp_path)),
                             "SHIM_CLOCK_OFFSET_FILE": str(offset)})
    try:
        wait_for(lambda: status(url)["engine_up"], 10, "engine up", proc)
        gone_at = time.time()
        engine.case = Case("gone", snapshot=hang_up(), metrics=hang_up())
        wait_for(lambda: status(url)["engine_up"] is False, 10, "a failed poll", proc,
                 interval=0.05)
        offset.write_text("-3600")
        t0 = time.monotonic()
        win = wait_for(lambda: status(url)["restore"]["window"], 20, "window open", proc,
                       interval=0.1)
        assert time.monotonic() - t0 < 15
        assert gone_at - 1 <= win["start"] <= gone_at + 5, (win["start"], gone_at)
        saved = StateStore(state_dir).load()
        assert saved is not None and saved.window is not None
        assert saved.window.start == win["start"]
        assert_serving(proc, url)
    finally:
        proc.stop()


def test_a_rotated_token_is_taken_and_the_right_one_never_locked_out(
        engine: HostileEngine, tmp_path: Path) -> None:
    """A rotated token got 401 and the old one kept working; wrong tokens from the same address
    (a stale script) locked the right one out for 40 s."""
    state_dir = tmp_path / "state"
    engine.case = Case("sane")
    proc, url = sidecar(engine, state_dir, tmp_path)
    rotated = "rotated-" + TOKEN
    try:
        wait_for(lambda: status(url)["engine_up"], 10, "engine up", proc)
        assert post_event(url, "d-1", "drain_started").status_code == 200
        (tmp_path / "token").write_text(rotated + "\n")
        assert post_event(url, "c-1", "window_closed").status_code == 401  # the old one
        assert post_event(url, "c-1", "window_closed", token=rotated).status_code == 200
        codes = [post_event(url, "x", "abort", token="stale").status_code for _ in range(7)]
        assert codes == [401] * 6 + [429]  # the stale script is slowed down...
        assert post_event(url, "d-2", "drain_started", token=rotated).status_code == 200  # ...not us
        saved = StateStore(state_dir).load()
        assert saved is not None and saved.window is not None
        assert saved.event_ids == ("d-1", "c-1", "d-2")
        assert_serving(proc, url)
    finally:
        proc.stop()


def test_an_engine_answering_an_invalid_snapshot_opens_no_window(
        engine: HostileEngine, tmp_path: Path) -> None:
    """A serving engine whose snapshot fails validation opened a restore window in phase
    `down` (restore pages for a bug in the snapshot): it is a source error, not an outage."""
    state_dir = tmp_path / "state"
    engine.case = Case("sane")
    proc, url = sidecar(engine, state_dir, tmp_path)
    try:
        wait_for(lambda: status(url)["engine_up"], 10, "engine up", proc)
        broken = sane_snapshot()
        broken["generation"] = 7  # a schema error
        engine.case = Case("invalid", snapshot=json_body(broken))
        wait_for(lambda: status(url)["sources"]["engine_snapshot"]["last_reason"] == "schema",
                 10, "a schema error", proc, interval=0.05)
        cycles = status(url)["poll_cycles"]
        wait_for(lambda: status(url)["poll_cycles"] > cycles + 20, 30, "4 s of polls", proc)
        s = status(url)
        assert s["restore"]["window"] is None and s["restore"]["phase"] == "serving"
        assert s["sources"]["engine_snapshot"]["last_reason"] == "schema"  # still failing
        assert_serving(proc, url)
    finally:
        proc.stop()
