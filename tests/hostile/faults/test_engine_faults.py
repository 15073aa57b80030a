"""The engine crashes, restarts, drains and vanishes in a loop (the simulator's admin endpoints, and
a SIGKILL of the simulator process itself) while one sidecar watches: after every step the
exposition is valid, the sidecar alive, and the restore window follows the engine."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.procs import Proc, Stack, wait_for
from tests.hostile.faults.faultlib import post, scrape, status
from tools.harness import sample

SIDECAR = ("--poll-interval", "0.2", "--timeout", "0.5", "--down-grace", "0.6",
           "--request-cutoff", "30", "--restore-bound", "60")


def phase(url: str) -> str:
    p: str = status(url)["restore"]["phase"]
    return p


def until(url: str, proc: Proc, what: str, check: Any, timeout: float = 15.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        s = status(url)
        return s if check(s) else None

    result: dict[str, Any] = wait_for(probe, timeout, what, proc, interval=0.1)
    return result


def valid_exposition(url: str, proc: Proc) -> dict[str, Any]:
    assert proc.popen is not None and proc.popen.poll() is None, proc.tail()
    fams = scrape(url)
    assert sample(fams, "helios_restore_window_open") in (0.0, 1.0)
    assert sample(fams, "helios_restore_state_write_errors") == 0.0
    return fams


def engine_container(sim_url: str) -> str:
    snap = httpx.get(sim_url + "/debug/offload/snapshot", timeout=3).json()
    container: str = snap["identity"]["container_id"]
    return container


def serving_again(s: dict[str, Any]) -> bool:
    return bool(s["restore"]["window"] is None and s["engine_up"])


def test_engine_crash_restart_drain_loop(stack: Stack, tmp_path: Path) -> None:
    sim, sim_url = stack.simulator("steady", "--seed", "11", "--rate", "2")
    side, url = stack.sidecar(sim_url, *SIDECAR)
    until(url, side, "engine up", serving_again)
    rng = random.Random(20261130)
    generations = {status(url)["generation"]}
    windows = 0
    # Identity checks compare with the last verified engine's container (a restore into a new
    # container is not verified, so the next restore is compared with the one before it).
    verified = {"container": engine_container(sim_url)}

    def window_closed_with(checks: dict[str, bool]) -> None:
        nonlocal windows
        s = until(url, side, "window closed", serving_again)
        windows += 1
        current = engine_container(sim_url)
        checks = {**checks, "container": current == verified["container"]}
        got = s["restore"]["checks"]
        assert {k: got.get(k) for k in checks} == checks, got
        if all(ok for k, ok in got.items() if k != "drained_admission"):
            verified["container"] = current
        generations.add(s["generation"])
        fams = valid_exposition(url, side)
        assert sample(fams, "helios_restore_window_open") == 0.0
        for check, ok in checks.items():
            assert sample(fams, "helios_restore_check_ok", check=check) == float(ok)

    def crash_restart(container: str) -> None:
        post(sim_url, "/admin/crash")
        s = until(url, side, "window open (unreachable)",
                  lambda s: s["restore"]["phase"] == "down")
        assert s["restore"]["window"]["cause"] in ("unreachable", "drain")
        assert s["sources"]["engine_snapshot"]["last_reason"] == "http_status"  # 503 while down
        fams = valid_exposition(url, side)
        assert sample(fams, "helios_restore_window_open") == 1.0
        assert sample(fams, "helios_engine_up") == 0.0
        assert sample(fams, "helios_restore_deadline_timestamp_seconds", bound="restore") is not None
        post(sim_url, "/admin/restart", {"container": container})
        window_closed_with({"fresh_generation": True, "image": True})

    def drain_then_open() -> None:
        nonlocal windows
        post(sim_url, "/admin/admission", {"state": "draining"})
        s = until(url, side, "drain window", lambda s: s["restore"]["phase"] in ("draining",
                                                                                    "drained"))
        assert s["restore"]["window"]["cause"] == "drain"
        judged = s["restore"]["checks"]
        valid_exposition(url, side)
        post(sim_url, "/admin/admission", {"state": "open"})
        # The drain called off: the same incarnation admits again, nothing was restored, and
        # no check is judged (those of the last restore stand).
        s = until(url, side, "window closed", serving_again)
        windows += 1
        last = s["restore"]["last_window"]
        assert last["nothing_restored"] is True and last["restored"] is None, last
        assert last["lost_requests"] in (0, None) and s["restore"]["checks"] == judged
        fams = valid_exposition(url, side)
        assert sample(fams, "helios_restore_last_window_restored") == 0.0

    def drain_crash_restart() -> None:
        post(sim_url, "/admin/admission", {"state": "draining"})
        until(url, side, "drain window", lambda s: s["restore"]["window"] is not None)
        post(sim_url, "/admin/admission", {"state": "closed"})
        valid_exposition(url, side)
        crash_restart(rng.choice(["same", "new"]))

    def flap() -> None:
        # Down for less than --down-grace: no window opens, the exposition stays valid.
        post(sim_url, "/admin/crash")
        valid_exposition(url, side)
        post(sim_url, "/admin/restart", {"container": "same"})
        s = until(url, side, "engine up", serving_again)
        generations.add(s["generation"])
        valid_exposition(url, side)

    actions = [lambda: crash_restart("same"), drain_then_open, drain_crash_restart, flap,
               lambda: crash_restart("new")]
    for i in range(10):
        (actions[i % len(actions)] if i < len(actions) else rng.choice(actions))()

    # The engine process itself dies (connection refused), and a new one takes its port.
    port = int(sim_url.rsplit(":", 1)[1])
    sim.kill()
    until(url, side, "engine refused", lambda s: s["sources"]["engine_snapshot"]["last_reason"]
              == "connect")
    until(url, side, "window open", lambda s: s["restore"]["phase"] == "down")
    valid_exposition(url, side)
    stack.simulator("steady", "--seed", "12", "--rate", "2", port=port)
    window_closed_with({"fresh_generation": True})
    assert status(url)["restore"]["checks"]["container"] is False  # a new process, new container

    assert windows >= 9
    assert len(generations) >= 7  # every restart was a new incarnation the sidecar followed
    log = side.log.read_text(errors="replace")
    assert "poll_cycle_failed" not in log and "Traceback" not in log
    assert httpx.get(url + "/healthz", timeout=3).status_code == 200
