"""The outage story end to end: simulated engine (outage scenario) -> sidecar, on 127.0.0.1."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.e2e.procs import ROOT, Stack, free_port, http_ok, query, wait_for

RULE_FILES = [ROOT / "alerts" / "helios-alerts.yaml", ROOT / "alerts" / "helios-recording.yaml"]

# serving 12 s (time for every process to start) -> draining 3 s -> closed 2 s -> down 6 s ->
# restored (about 23 s in).
TIMELINE = ("--outage-after", "12", "--drain-seconds", "3", "--closed-seconds", "2",
            "--down-seconds", "6", "--rate", "2")
SIDECAR = ("--poll-interval", "0.3", "--down-grace", "1", "--request-cutoff", "20",
           "--restore-bound", "40")

SAME = {"image": True, "container": True, "package": True, "checkpoint": True,
        "fresh_generation": True, "drained_admission": True}
VARIANTS: dict[str, tuple[tuple[str, ...], dict[str, bool]]] = {
    "retained": ((), SAME),
    "new-container": (("--outage-container", "new"), {**SAME, "container": False}),
    "old-generation": (("--outage-keep-generation",), {**SAME, "fresh_generation": False}),
    "stuck-requests": (("--outage-stuck-requests", "2"), {**SAME, "drained_admission": False}),
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
        assert st["restore"]["checks"] == expected, (name, st["restore"])
        assert st["restore"]["last_window"]["outcome"] == "in_time"
        url = sidecars[name]
        for check, ok in expected.items():
            assert metric(url, f'helios_restore_check_ok{{check="{check}"}}') == float(ok)
        assert metric(url, "helios_restore_window_open") == 0.0
        assert metric(url, "helios_restore_window_start_timestamp_seconds") is None
    stuck = status(sidecars["stuck-requests"])["restore"]
    assert stuck["last_window"]["lost_requests"] == 2  # in flight when the engine went away
    assert stuck["failed_checks"][0]["found"] == "2 requests lost"
    assert metric(sidecars["stuck-requests"], "helios_restore_last_window_lost_requests") == 2
    moved = status(sidecars["new-container"])["restore"]
    (failed,) = moved["failed_checks"]
    assert failed["check"] == "container"
    assert failed["expected"] == moved["last_window"]["incumbent"]["container_id"]
    assert failed["found"] == moved["last_window"]["restored"]["container_id"] != failed["expected"]
    assert {"drained", "down"} <= phases["retained"]
    assert "draining" in phases["stuck-requests"]
    assert "drained" not in phases["stuck-requests"]


def admin(engine_url: str, action: str, body: dict[str, Any] | None = None) -> None:
    """The simulated engine's /admin endpoints: the engine team's side of an outage."""
    httpx.post(f"{engine_url}/admin/{action}", json=body or {}, timeout=10).raise_for_status()


def test_sidecar_killed_mid_window_keeps_start_and_incumbent(stack: Stack) -> None:
    # The outage is driven through /admin once the sidecar has seen the engine serve: a fixed
    # timeline from the engine's start is missed by a sidecar slow to start on a loaded machine
    # (its first look would be the engine already down: no incumbent, nothing to check).
    _, engine_url = stack.simulator("steady", "--rate", "2", "--seed", "5")
    state_dir = stack.tmp / "state"
    proc, url = stack.sidecar(engine_url, *SIDECAR, state_dir=state_dir)
    wait_for(lambda: status(url)["engine_up"], 20, "engine seen serving", proc)
    admin(engine_url, "admission", {"state": "draining"})
    wait_for(lambda: status(url)["restore"]["window"], 20, "window open", proc)
    admin(engine_url, "crash")
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
    admin(engine_url, "restart", {"container": "same"})
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


def engine_snapshot(engine_url: str) -> dict[str, Any]:
    snap: dict[str, Any] = httpx.get(engine_url + "/debug/offload/snapshot", timeout=3).json()
    return snap


def prom_value(prom: str, expr: str) -> float | None:
    result = query(prom, expr)
    return float(result[0]["value"][1]) if result else None


def cutoff_rule() -> str:
    """The shipped HeliosRequestCutoffBreached rule, as text."""
    rules = yaml.safe_load(RULE_FILES[0].read_text())
    (rule,) = [r for g in rules["groups"] for r in g["rules"]
               if r.get("alert") == "HeliosRequestCutoffBreached"]
    return str(rule["expr"])


def test_restored_engine_traffic_never_reads_as_the_incumbents(stack: Stack) -> None:
    """The window stays open past the request cutoff (the routed preflight URL refuses)
    while the restored engine serves; Prometheus must never see its requests as the incumbent's."""
    _, engine_url = stack.simulator("outage", "--outage-after", "8", "--drain-seconds", "2",
                                    "--closed-seconds", "1", "--down-seconds", "3", "--rate", "4",
                                    "--seed", "7")
    refusing = f"http://127.0.0.1:{free_port()}/v1/completions"  # nothing listens there
    proc, url = stack.sidecar(engine_url, "--poll-interval", "0.3", "--down-grace", "1",
                              "--request-cutoff", "5", "--restore-bound", "600",
                              "--preflight-routed-url", refusing)
    _, prom = stack.prometheus([url.removeprefix("http://")], RULE_FILES)
    started = time.time()
    wait_for(lambda: status(url)["restore"]["phase"] == "down", 40, "engine down", proc)
    down_seen = time.time()
    st = wait_for(lambda: (s := status(url))["restore"]["phase"] == "verifying" and s, 30,
                  "restored engine admitting, routed preflight failing", proc)
    restored = st["generation"]
    assert st["restore"]["window"]["restored"]["generation"] == restored
    # The restored engine serves past the cutoff, and Prometheus has seen its requests.
    wait_for(lambda: (prom_value(prom, f'max_over_time(helios_engine_inflight_requests'
                                       f'{{generation="{restored}"}}[5m])') or 0) > 0,
             30, "restored engine traffic in Prometheus", proc)
    wait_for(lambda: status(url)["restore"]["window"]["seconds_to_request_cutoff"] < -3, 30,
             "past the request cutoff", proc)
    time.sleep(2)  # two more scrapes
    st = status(url)["restore"]
    assert st["phase"] == "verifying" and st["window"]["incumbent_gone"] is True
    assert st["window"]["incumbent_inflight_requests"] == 0
    since = int(time.time() - down_seen - 1)
    series = f"helios_restore_incumbent_inflight_requests{{job='helios-exporter'}}[{since}s]"
    assert (prom_value(prom, f"count_over_time({series})") or 0) >= since - 2  # present
    assert prom_value(prom, f"max_over_time({series})") == 0.0
    assert metric(url, "helios_restore_window_open") == 1.0
    # The page computed from it, with the shipped rules: never pending, never firing, although
    # the cutoff passed with the window open and the restored engine busy.
    assert "helios:restore_incumbent_inflight_requests:last_seen" in cutoff_rule()
    whole = int(time.time() - started) + 1
    assert query(prom, f'count_over_time(ALERTS{{alertname="HeliosRequestCutoffBreached"}}'
                       f'[{whole}s])') == []


def test_sidecar_killed_across_an_on_time_restore_is_never_late(stack: Stack) -> None:
    """The sidecar dies while the engine is down and comes back after the restore
    deadline; the engine was back before it. The outcome is decided by evidence, not by when the
    sidecar came back: here the deadline lies between the bounds, so `unobserved`."""
    _, engine_url = stack.simulator("outage", "--outage-after", "8", "--drain-seconds", "1",
                                    "--closed-seconds", "1", "--down-seconds", "3", "--rate", "2",
                                    "--seed", "9")
    state_dir = stack.tmp / "state"
    bounds = ("--poll-interval", "0.3", "--down-grace", "1", "--request-cutoff", "5",
              "--restore-bound", "12")
    proc, url = stack.sidecar(engine_url, *bounds, state_dir=state_dir)
    st = wait_for(lambda: (s := status(url))["restore"]["phase"] == "down" and s, 40,
                  "engine down inside the window", proc)
    window = st["restore"]["window"]
    incumbent = window["incumbent"]["generation"]
    proc.stop(signal.SIGKILL)
    snap = wait_for(lambda: (s := engine_snapshot(engine_url))["generation"] != incumbent and s,
                    30, "engine restored while the sidecar is dead")
    assert snap["started_at"] <= window["restore_deadline"]  # restored in time, really
    wait_for(lambda: time.time() > window["restore_deadline"] + 1, 30, "past the deadline")
    proc2, url2 = stack.sidecar(engine_url, *bounds, state_dir=state_dir, name="sidecar-2")
    st = wait_for(lambda: (s := status(url2))["restore"]["last_window"] and s, 30,
                  "window closed after the restart", proc2)
    last = st["restore"]["last_window"]
    assert last["start"] == window["start"]
    assert last["outcome"] == "unobserved", last
    assert last["evidence"]["not_before"] == pytest.approx(snap["started_at"])
    assert last["evidence"]["not_before"] <= window["restore_deadline"] < last["evidence"]["not_after"]
    assert metric(url2, 'helios_restore_last_window_outcome{outcome="late"}') == 0.0
    assert metric(url2, 'helios_restore_last_window_outcome{outcome="unobserved"}') == 1.0
    assert st["restore"]["checks"]["fresh_generation"] is True


def test_restore_into_a_new_container_nobody_watched_pages(stack: Stack) -> None:
    """The sidecar is down from before the drain until after a restore into a new
    container. At its next start it records the restore (`unobserved`) and its failed check."""
    _, engine_url = stack.simulator("outage", "--outage-after", "8", "--drain-seconds", "1",
                                    "--closed-seconds", "1", "--down-seconds", "2", "--rate", "2",
                                    "--outage-container", "new", "--seed", "13")
    state_dir = stack.tmp / "state"
    proc, url = stack.sidecar(engine_url, *SIDECAR, state_dir=state_dir)
    before = wait_for(lambda: (s := status(url))["engine_up"] and s, 20, "engine seen", proc)
    assert before["restore"]["window"] is None
    old = engine_snapshot(engine_url)
    proc.stop(signal.SIGKILL)
    new = wait_for(lambda: (s := engine_snapshot(engine_url))["generation"] != old["generation"]
                   and s, 40, "engine restored while the sidecar is dead")
    proc2, url2 = stack.sidecar(engine_url, *SIDECAR, state_dir=state_dir, name="sidecar-2")
    st = wait_for(lambda: (s := status(url2))["restore"]["last_window"] and s, 20,
                  "restore recorded at the start", proc2)["restore"]
    last = st["last_window"]
    assert last["outcome"] == "unobserved" and last["start"] is None
    assert last["evidence"]["not_before"] == pytest.approx(new["started_at"])
    assert st["failed_checks"] == [{"check": "container",
                                    "expected": old["identity"]["container_id"],
                                    "found": new["identity"]["container_id"]}]
    assert "drained_admission" not in st["checks"]
    assert metric(url2, 'helios_restore_check_ok{check="container"}') == 0.0
    assert metric(url2, 'helios_restore_check_ok{check="drained_admission"}') is None
    assert metric(url2, 'helios_restore_last_window_outcome{outcome="unobserved"}') == 1.0
