"""POST/GET /experiment/phases through the real sidecar app, against the simulator's real app."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from exporter.defaults import MAX_OPEN_PHASES
from exporter.phases.book import STATE_FILE
from exporter.restore.events import MAX_BODY_BYTES
from tests.exporter.phases.phase_env import AUTH, TOKEN, PhaseEnv, bodies
from tests.helpers import promtool_check_metrics
from tools.harness import families, sample


@pytest.fixture
def env(tmp_path: Path) -> Iterator[PhaseEnv]:
    (tmp_path / "state").mkdir()
    e = PhaseEnv(tmp_path / "state")
    yield e
    e.close()


def ended(e: PhaseEnv, name: str) -> dict[str, Any]:
    resp = e.phase("end", name)
    assert resp.status_code == 200, resp.text
    phase: dict[str, Any] = resp.json()["phase"]
    return phase


# -- captures at the edges ----------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 12])
def test_a_phase_of_n_requests_shows_exactly_n_lookups(env: PhaseEnv, n: int) -> None:
    # The poll interval is an hour and a cycle already ran before the traffic: only captures
    # taken at the edges themselves can see these requests.
    env.cycle()
    env.send(bodies("probe-52")[:3])  # before the phase: must not count
    assert env.phase("begin", "edge/1").status_code == 200
    env.send(bodies("probe-52")[3:3 + n])
    phase = ended(env, "edge/1")
    d = phase["deltas"]
    assert phase["valid"] is True
    assert (d["lookups"], d["requests"], d["e2e_latency_seconds"]["count"]) == (n, n, n)
    assert sum(d["misses"].values()) + d["hits"] == n
    env.send(bodies("probe-52")[:2])  # after the phase: must not count either
    assert env.phases()[0]["deltas"]["lookups"] == n


def test_a_capture_is_timed_when_its_poll_runs_not_when_it_was_asked_for(
        tmp_path: Path) -> None:
    now = [1000.0]
    (tmp_path / "state").mkdir()
    e = PhaseEnv(tmp_path / "state", clock=lambda: now[0])

    async def begin_during_a_cycle() -> Any:
        # A poll cycle is running (it holds the loop's cycle lock) when the phase edge arrives;
        # it takes a minute, and only then does the edge's own poll run.
        lock = e.sidecar.loop._cycle_lock
        await lock.acquire()
        edge = asyncio.create_task(e.sidecar.phases.begin("late/1", None))
        await asyncio.sleep(0.01)
        assert not edge.done()
        now[0] = 1060.0
        lock.release()
        return await edge

    try:
        phase = e.run(begin_during_a_cycle())
        assert phase.begin.at == 1060.0
        assert e.sidecar.loop.view.polled_at == 1060.0
    finally:
        e.close()


def test_the_answer_carries_the_fresh_capture(env: PhaseEnv) -> None:
    env.cycle()
    env.send(bodies()[:4])
    resp = env.phase("begin", "fresh")
    assert resp.status_code == 200
    capture = resp.json()["capture"]
    assert capture["counters"]["lookups.total"] == 4  # not the stale cycle's 0
    assert capture["requests"] == 4
    assert capture["generation"] == env.engine.generation
    assert resp.json()["phase"]["state"] == "open"


def test_second_phase_begins_after_the_first_ended_and_overlapping_phases_are_allowed(
        env: PhaseEnv) -> None:
    assert env.phase("begin", "outer").status_code == 200
    env.send(bodies()[:2])
    assert env.phase("begin", "inner").status_code == 200
    env.send(bodies()[2:5])
    inner = ended(env, "inner")
    outer = ended(env, "outer")
    assert (inner["deltas"]["lookups"], outer["deltas"]["lookups"]) == (3, 5)


# -- conflicts ----------------------------------------------------------------------------------
def test_begin_twice_is_409_and_keeps_the_first_capture(env: PhaseEnv) -> None:
    first = env.phase("begin", "p/1").json()["capture"]
    env.send(bodies()[:2])
    again = env.phase("begin", "p/1")
    assert again.status_code == 409
    assert "open" in again.json()["detail"]
    assert env.phases()[0]["begin"] == first


def test_end_of_a_phase_never_begun_is_409(env: PhaseEnv) -> None:
    resp = env.phase("end", "never")
    assert resp.status_code == 409
    assert env.phases() == []


def test_end_twice_and_begin_of_an_ended_name_are_409(env: PhaseEnv) -> None:
    env.phase("begin", "p/1")
    first_end = ended(env, "p/1")
    assert env.phase("end", "p/1").status_code == 409
    resp = env.phase("begin", "p/1")
    assert resp.status_code == 409
    assert "unique" in resp.json()["detail"]
    assert env.phases()[0]["end"] == first_end["end"]


def test_more_than_the_open_limit_is_409(env: PhaseEnv) -> None:
    for i in range(MAX_OPEN_PHASES):
        assert env.phase("begin", f"open/{i}").status_code == 200
    assert env.phase("begin", "one-too-many").status_code == 409
    assert env.phase("end", "open/0").status_code == 200
    assert env.phase("begin", "one-too-many").status_code == 200


# -- validity -----------------------------------------------------------------------------------
def test_a_phase_across_a_generation_change_is_invalid_and_says_so(env: PhaseEnv) -> None:
    env.phase("begin", "restart")
    env.send(bodies()[:3])
    before = env.engine.generation
    env.engine.restart("same")
    env.send(bodies()[:1])
    phase = ended(env, "restart")
    assert phase["valid"] is False
    assert before in phase["invalid_reasons"][0] and env.engine.generation in phase["invalid_reasons"][0]
    assert phase["end"]["generation"] == env.engine.generation != phase["generation"]


def test_engine_down_is_503_and_changes_nothing(env: PhaseEnv) -> None:
    env.phase("begin", "down")
    env.engine.crash()
    for action, name in (("begin", "other"), ("end", "down")):
        resp = env.phase(action, name)
        assert resp.status_code == 503, resp.text
        assert "snapshot" in resp.json()["detail"]
    assert [(p["name"], p["state"]) for p in env.phases()] == [("down", "open")]
    env.engine.restart("same")
    assert env.phase("end", "down").json()["phase"]["valid"] is False  # generation changed


# -- auth, as the events API ------------------------------------------------------------------
ROUTES = ("/experiment/phases", "/restore/events")
GOOD = {"/experiment/phases": {"name": "auth/1", "action": "begin"},
        "/restore/events": {"id": "auth-1", "event": "abort"}}


@pytest.mark.parametrize("path", ROUTES)
def test_no_token_file_is_404_on_both_routes(tmp_path: Path, path: str) -> None:
    (tmp_path / "state").mkdir()
    e = PhaseEnv(tmp_path / "state", token=None)
    try:
        for headers in ({}, AUTH):
            assert e.post(GOOD[path], headers, path=path).status_code == 404
        assert e.phases() == []
    finally:
        e.close()


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", "Bearer", TOKEN,
                                    f"Bearer {TOKEN}x"])
def test_missing_or_wrong_token_is_401_on_both_routes(env: PhaseEnv, path: str,
                                                      header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    resp = env.post(GOOD[path], headers, path=path)
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == "Bearer"
    assert env.phases() == []


@pytest.mark.parametrize("path", ROUTES)
def test_auth_is_checked_before_the_body(env: PhaseEnv, path: str) -> None:
    assert env.post(headers={}, content=b"x" * (MAX_BODY_BYTES + 1), path=path).status_code == 401


@pytest.mark.parametrize("path", ROUTES)
def test_body_over_the_limit_is_413_on_both_routes(env: PhaseEnv, path: str) -> None:
    big = {**GOOD[path], "note": "n" * MAX_BODY_BYTES}
    assert env.post(big, path=path).status_code == 413
    assert env.phases() == []


@pytest.mark.parametrize("body", [
    {"name": "", "action": "begin"},
    {"name": "x" * 65, "action": "begin"},
    {"name": "has space", "action": "begin"},
    {"name": "colon:no", "action": "begin"},
    {"name": "new\nline", "action": "begin"},
    {"name": "ok", "action": "restart"},
    {"name": "ok"},
    {"action": "begin"},
    {"name": 5, "action": "begin"},
    {"name": "ok", "action": "begin", "note": "n" * 257},
    [],
    "begin",
])
def test_invalid_bodies_are_422_without_echo(env: PhaseEnv, body: Any) -> None:
    resp = env.post(body)
    assert resp.status_code == 422, resp.text
    for value in ("has space", "colon:no", "restart", "x" * 65, "n" * 257):
        assert value not in resp.text
    assert env.phases() == []


def test_every_allowed_character_makes_a_name(env: PhaseEnv) -> None:
    name = "AZaz09._/-" + "x" * 54
    assert env.phase("begin", name).status_code == 200


def test_unknown_fields_are_ignored_like_the_events_api(env: PhaseEnv) -> None:
    assert env.post({"name": "extra", "action": "begin", "by": "me"}).status_code == 200


def test_the_token_is_never_logged(env: PhaseEnv) -> None:
    with capture_logs() as logs:
        env.phase("begin", "quiet", note="a note")
        env.post(GOOD["/experiment/phases"], {"Authorization": "Bearer wrong-token-value"})
    text = json.dumps(logs, default=str)
    assert TOKEN not in text and "wrong-token-value" not in text
    assert any(entry.get("phase") == "quiet" and entry.get("note") == "a note" for entry in logs)


# -- exported for Grafana ---------------------------------------------------------------------
@pytest.mark.e2e
def test_open_phases_are_exported_and_leave_when_ended(env: PhaseEnv) -> None:
    env.cycle()
    assert "helios_experiment_phase" not in env.metrics()
    began = env.phase("begin", "probe-52/forward-1").json()["capture"]["at"]
    text = env.metrics()
    promtool_check_metrics(text.encode())
    fams = families(text)
    assert sample(fams, "helios_experiment_phase_open", phase="probe-52/forward-1") == 1.0
    assert sample(fams, "helios_experiment_phase_start_timestamp_seconds",
                  phase="probe-52/forward-1") == began
    env.phase("end", "probe-52/forward-1")
    assert "helios_experiment_phase" not in env.metrics()


def test_a_background_cycle_keeps_the_open_phases(env: PhaseEnv) -> None:
    env.phase("begin", "kept")
    env.cycle()
    assert sample(families(env.metrics()), "helios_experiment_phase_open", phase="kept") == 1.0


# -- durability -------------------------------------------------------------------------------
def test_an_open_phase_survives_a_new_sidecar_on_the_same_state_dir(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    first = PhaseEnv(tmp_path / "state")
    began = first.phase("begin", "durable").json()["capture"]
    first.close()
    second = PhaseEnv(tmp_path / "state")  # a new engine too: same seed, same generation
    try:
        [phase] = second.phases()
        assert (phase["name"], phase["state"], phase["begin"]) == ("durable", "open", began)
        assert sample(families(second.metrics()), "helios_experiment_phase_open",
                      phase="durable") == 1.0
        assert second.phase("begin", "durable").status_code == 409
        second.send(bodies()[:2])
        assert ended(second, "durable")["deltas"]["lookups"] == 2
    finally:
        second.close()


def test_a_phase_that_cannot_be_written_is_503_and_not_begun(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    e = PhaseEnv(tmp_path / "state")
    try:
        # A directory where the file belongs: the atomic rename fails like a full disk would.
        (tmp_path / "state" / STATE_FILE).mkdir()
        resp = e.phase("begin", "lost")
        assert resp.status_code == 503
        assert "nothing changed" in resp.json()["detail"]
        assert e.phases() == []
        (tmp_path / "state" / STATE_FILE).rmdir()
        assert e.phase("begin", "lost").status_code == 200
    finally:
        e.close()


def test_a_corrupt_phases_file_is_moved_aside(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / STATE_FILE).write_text('{"format": 1, "phases": [{"name": 3}]}')
    with capture_logs() as logs:
        e = PhaseEnv(state)
    try:
        assert e.phases() == []
        aside = [p.name for p in state.iterdir() if ".corrupt-" in p.name]
        assert len(aside) == 1
        assert any(entry["event"] == "phases_state_unusable" for entry in logs)
        assert e.phase("begin", "fresh-start").status_code == 200
    finally:
        e.close()


def test_an_unreadable_phases_file_is_never_overwritten(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / STATE_FILE).mkdir()  # reading it fails with an I/O error, also for root
    e = PhaseEnv(state)
    try:
        resp = e.phase("begin", "x")
        assert resp.status_code == 503
        assert "not overwritten" in resp.json()["detail"]
        assert (state / STATE_FILE).is_dir()
        (state / STATE_FILE).rmdir()
        assert e.phase("begin", "x").status_code == 200  # read again at the next change
    finally:
        e.close()


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_fifo_or_link_at_the_phases_path_is_held_never_followed(tmp_path: Path,
                                                                   kind: str) -> None:
    """Read through exporter/durable.read_regular, as the restore state: a FIFO no longer hangs
    the start, a link is never followed nor written through."""
    state = tmp_path / "state"
    state.mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_text('{"format": 1, "phases": []}')
    if kind == "fifo":
        os.mkfifo(state / STATE_FILE)
    else:
        (state / STATE_FILE).symlink_to(target)
    e = PhaseEnv(state)
    try:
        resp = e.phase("begin", "x")
        assert resp.status_code == 503 and "not overwritten" in resp.json()["detail"]
        assert target.read_text() == '{"format": 1, "phases": []}'
    finally:
        e.close()
