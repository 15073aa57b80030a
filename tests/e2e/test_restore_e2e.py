"""The outage story end to end: simulated engine (outage scenario) -> sidecar, on 127.0.0.1."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.procs import Stack, http_ok, wait_for

# serving 12 s (time for every process to start) -> draining 3 s -> closed 2 s -> down 6 s ->
# restored (about 23 s in).
TIMELINE = ("--outage-after", "12", "--drain-seconds", "3", "--closed-seconds", "2",
            "--down-seconds", "6", "--rate", "2")
SIDECAR = ("--poll-interval", "0.3", "--down-grace", "1", "--request-cutoff", "20",
           "--restore-bound", "40")

VARIANTS: dict[str, tuple[tuple[str, ...], dict[str, bool]]] = {
    "retained": ((), {"image": True, "container": True, "fresh_generation": True,
                      "drained_admission": True}),
    "new-container": (("--outage-container", "new"), {"image": True, "container": False,
                                                      "fresh_generation": True,
                                                      "drained_admission": True}),
    "old-generation": (("--outage-keep-generation",), {"image": True, "container": True,
                                                      "fresh_generation": False,
                                                      "drained_admission": True}),
    "stuck-requests": (("--outage-stuck-requests", "2"), {"image": True, "container": True,
                                                         "fresh_generation": True,
                                                         "drained_admission": False}),
}


def status(url: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(url + "/status", timeout=3).json()
    return data


def metric(url: str, line_prefix: str) -> float | None:
    for line in httpx.get(url + "/metrics", timeout=3).text.splitlines():
        if line.startswith(line_prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_outage_variants_produce_the_right_checks(stack: Stack) -> None:
    # Start everything at once: the scenario clocks start with each simulator.
    engines = {name: stack.simulator("outage", *TIMELINE, *extra, "--seed", "11", wait=False)
               for name, (extra, _) in VARIANTS.items()}
    procs = {name: stack.sidecar(url, *SIDECAR, state_dir=stack.tmp / f"state-{name}",
                                 name=name, wait=False)
             for name, (_, url) in engines.items()}
    sidecars = {name: url for name, (_, url) in procs.items()}
    for name, (proc, url) in procs.items():
        wait_for(lambda url=url: http_ok(url + "/readyz"), 30, f"{name} ready", proc)
        assert status(url)["restore"]["window"] is None, f"{name}: window opened too early"
    phases: dict[str, set[str]] = {name: set() for name in sidecars}
    # Every sidecar sees a window open by the engine draining.
    for name, url in sidecars.items():
        def opened(name: str = name, url: str = url) -> Any:
            st = status(url)
            phases[name].add(st["restore"]["phase"])
            return st["restore"]["window"]

        window = wait_for(opened, 20, f"{name}: window open", interval=0.1)
        assert window["cause"] == "drain"
        assert window["request_cutoff_deadline"] == pytest.approx(window["start"] + 20)
        assert window["restore_deadline"] == pytest.approx(window["start"] + 40)
        assert metric(url, "helios_restore_window_open") == 1.0

    def closed(name: str) -> dict[str, Any] | None:
        st = status(sidecars[name])
        phases[name].add(st["restore"]["phase"])
        return st if st["restore"]["last_window"] else None

    for name, (_, expected) in VARIANTS.items():
        st = wait_for(lambda name=name: closed(name), 40, f"{name}: window closed", interval=0.1)
        assert st["restore"]["checks"] == expected, name
        assert st["restore"]["last_window"]["outcome"] == "in_time"
        url = sidecars[name]
        for check, ok in expected.items():
            assert metric(url, f'helios_restore_check_ok{{check="{check}"}}') == float(ok)
        assert metric(url, "helios_restore_window_open") == 0.0
        assert metric(url, "helios_restore_window_start_timestamp_seconds") is None
    assert {"drained", "down"} <= phases["retained"]
    assert "draining" in phases["stuck-requests"]
    assert "drained" not in phases["stuck-requests"]


def test_sidecar_killed_mid_window_keeps_start_and_incumbent(stack: Stack) -> None:
    _, engine_url = stack.simulator("outage", "--outage-after", "2", "--drain-seconds", "2",
                                    "--closed-seconds", "1", "--down-seconds", "12", "--rate",
                                    "2", "--seed", "5")
    state_dir = stack.tmp / "state"
    proc, url = stack.sidecar(engine_url, *SIDECAR, state_dir=state_dir)
    before = wait_for(lambda: (s := status(url))["restore"]["phase"] == "down" and s, 20,
                      "engine down inside the window", proc)
    window = before["restore"]["window"]
    proc.stop(signal.SIGKILL)
    saved = json.loads((state_dir / "restore-state.json").read_text())
    assert saved["state"]["window"]["start"] == window["start"]
    proc2, url2 = stack.sidecar(engine_url, *SIDECAR, state_dir=state_dir, name="sidecar-2")
    after = status(url2)["restore"]["window"]
    assert after["start"] == window["start"]  # to the millisecond and beyond
    assert after["incumbent"] == window["incumbent"]
    assert metric(url2, "helios_restore_window_start_timestamp_seconds") == pytest.approx(
        window["start"], abs=1e-3)
    st = wait_for(lambda: (s := status(url2))["restore"]["last_window"] and s, 30,
                  "window closed after the restart", proc2)
    assert st["restore"]["last_window"]["start"] == window["start"]
    assert st["restore"]["checks"]["fresh_generation"] is True
    assert st["restore"]["checks"]["container"] is True


def test_corrupt_state_file_is_moved_aside_and_counted(stack: Stack, tmp_path: Path) -> None:
    _, engine_url = stack.simulator("steady", "--seed", "3")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "restore-state.json").write_bytes(b'{"format": 1, "state": {"window": {"sta')
    proc, url = stack.sidecar(engine_url, "--poll-interval", "0.3", state_dir=state_dir)
    assert metric(url, "helios_restore_state_corrupt_total") == 1.0
    assert metric(url, "helios_restore_window_open") == 0.0
    aside = list(state_dir.glob("restore-state.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b'{"format": 1')
    assert "corrupt state file" in proc.log.read_text()
    wait_for(lambda: (state_dir / "restore-state.json").exists()
             or status(url)["engine_up"], 10, "sidecar keeps working", proc)
