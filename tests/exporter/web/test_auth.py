"""Failed credentials: counted by path, logged without the secret, repeated ones slowed down; the
right bearer token never locked out by others' failures, a rotated token file read again (basic
auth through the real app: test_basic_auth_app.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from structlog.testing import capture_logs

from exporter.web.auth import AuthFailures
from tests.exporter.web.authapp import TOKEN, Sidecar, logged


def test_the_slow_down_schedule() -> None:
    now = [100.0]
    failures = AuthFailures(clock=lambda: now[0])
    for _ in range(5):
        assert failures.penalty("/metrics", "10.0.0.9") is None
        failures.failed("/metrics", "10.0.0.9", "basic")
    assert failures.penalty("/metrics", "10.0.0.9") is None  # five are free
    waits = []
    for _ in range(9):
        failures.failed("/metrics", "10.0.0.9", "basic")
        waits.append(failures.penalty("/metrics", "10.0.0.9"))
        now[0] += 61
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    assert failures.counts[("/metrics", "wrong")] == 14
    assert failures.counts[("/metrics", "throttled")] == 9
    assert failures.penalty("/metrics", "10.0.0.8") is None  # another client is not affected
    failures.failed("/status", "10.0.0.9", "basic")
    assert failures.throttled_clients() == 1
    failures.succeeded("10.0.0.9")
    assert failures.penalty("/status", "10.0.0.9") is None and failures.throttled_clients() == 0


def test_failures_are_forgotten_after_ten_quiet_minutes() -> None:
    now = [0.0]
    failures = AuthFailures(clock=lambda: now[0])
    for _ in range(5):
        failures.failed("/", "c", "basic")
    now[0] += 601
    failures.failed("/", "c", "basic")
    assert failures.penalty("/", "c") is None


def test_remembered_clients_are_bounded() -> None:
    failures = AuthFailures(max_clients=100)
    for i in range(1000):
        failures.failed("/metrics", f"10.0.{i // 256}.{i % 256}", "bearer")
    assert failures.remembered_clients() == 100


def test_unknown_paths_count_as_other() -> None:
    failures = AuthFailures()
    failures.missing("/metrics/../../etc", None, "basic")
    assert failures.counts[("other", "missing")] == 1


def test_wrong_bearer_tokens_are_counted_logged_without_the_token_and_slowed_down(
        tmp_path: Path) -> None:
    env = Sidecar(tmp_path)
    body = {"id": "e1", "event": "drain_started"}
    wrong = "Bearer guess-" + TOKEN[::-1]

    async def go(c: httpx.AsyncClient) -> list[httpx.Response]:
        answers = [await c.post("/restore/events", json=body)]  # missing: never penalised
        answers += [await c.post("/restore/events", json=body, headers={"Authorization": wrong})
                    for _ in range(6)]
        # The right token is not locked out by the failures from its address (rationed)...
        answers.append(await c.post("/restore/events", json=body,
                                    headers={"Authorization": f"Bearer {TOKEN}"}))
        # ...and the penalty of those failures runs on: a wrong one is not looked at.
        answers.append(await c.post("/restore/events", json=body,
                                    headers={"Authorization": wrong}))
        return answers

    with capture_logs() as logs:
        answers = env.run(go)
    assert [a.status_code for a in answers] == [401] * 7 + [200, 429]
    assert answers[1].headers["www-authenticate"] == "Bearer"
    assert answers[-1].headers["retry-after"] == "1"
    assert env.failures("/restore/events", "missing") == 1
    assert env.failures("/restore/events", "wrong") == 6
    assert env.failures("/restore/events", "throttled") == 1
    assert env.failures("/metrics", "wrong") == 0
    failed = [e for e in logs if e["event"] == "auth_failed"]
    assert len(failed) == 6 and {e["client"] for e in failed} == {"10.1.2.3"}
    assert failed[-1]["slowed_down_s"] == 1.0 and failed[-1]["path"] == "/restore/events"
    text = logged(logs)
    assert TOKEN not in text and TOKEN[::-1] not in text


def test_both_bearer_apis_share_the_count_and_the_slow_down(tmp_path: Path) -> None:
    """Guessing on the phases API slows the client down on the events API too; each path
    counts its own failures."""
    env = Sidecar(tmp_path)
    wrong = {"Authorization": "Bearer nope"}

    async def go(c: httpx.AsyncClient) -> list[int]:
        codes = [(await c.post("/experiment/phases", json={"name": "a", "action": "begin"},
                               headers=wrong)).status_code for _ in range(6)]
        codes.append((await c.post("/restore/events", json={"id": "e", "event": "abort"},
                                   headers=wrong)).status_code)
        return codes

    assert env.run(go) == [401] * 6 + [429]
    assert env.failures("/experiment/phases", "wrong") == 6
    assert env.failures("/restore/events", "throttled") == 1


def test_the_right_bearer_token_resets_the_count(tmp_path: Path) -> None:
    env = Sidecar(tmp_path)
    body = {"id": "e2", "event": "drain_started"}  # accepted: it opens a window

    async def go(c: httpx.AsyncClient) -> list[int]:
        codes = []
        for _ in range(4):
            codes.append((await c.post("/restore/events", json=body,
                                       headers={"Authorization": "Bearer nope"})).status_code)
        codes.append((await c.post("/restore/events", json=body,
                                   headers={"Authorization": f"Bearer {TOKEN}"})).status_code)
        for _ in range(5):
            codes.append((await c.post("/restore/events", json=body,
                                       headers={"Authorization": "Bearer nope"})).status_code)
        return codes

    assert env.run(go) == [401] * 4 + [200] + [401] * 5


def test_the_right_token_is_never_locked_out_by_others_failures(tmp_path: Path) -> None:
    """A stale script beside the restore tooling retries a wrong token until its penalty is 32 s:
    before, that kept the right token out for as long. Now the right one passes during the
    penalty, rationed (3 at once, then 1 a second: every comparison during a penalty counts, a
    guesser's too, so the penalty is no guessing oracle); the script stays slowed down."""
    clock = [1000.0]
    failures = AuthFailures(clock=lambda: clock[0])
    env = Sidecar(tmp_path, failures)
    right = {"Authorization": f"Bearer {TOKEN}"}
    wrong = {"Authorization": "Bearer stale-token"}

    async def go(c: httpx.AsyncClient) -> list[int]:
        def post(headers: dict[str, str], id_: str, kind: str) -> Any:
            return c.post("/restore/events", headers=headers, json={"id": id_, "event": kind})
        codes = [(await post(wrong, "x", "abort")).status_code for _ in range(6)]
        for wait in (1.5, 2.5, 4.5, 8.5, 16.5):  # each retry after its penalty: 2, 4 ... 32 s
            clock[0] += wait
            codes.append((await post(wrong, "x", "abort")).status_code)
        clock[0] += 1.0  # 31 s of penalty left
        for id_, kind in (("d1", "drain_started"), ("a1", "abort"), ("d2", "drain_started"),
                          ("a2", "abort"), ("a3", "abort")):
            codes.append((await post(right, id_, kind)).status_code)
        codes.append((await post(wrong, "x", "abort")).status_code)
        clock[0] += 1.0
        codes.append((await post(right, "a2", "abort")).status_code)
        return codes

    codes = env.run(go)
    assert codes[:11] == [401] * 11
    assert codes[11:] == [200, 200, 200, 429, 429, 429, 200], codes[11:]
    assert failures.penalty_running("10.1.2.3")  # the script's penalty runs on


def test_a_rotated_token_file_is_read_again(tmp_path: Path) -> None:
    env = Sidecar(tmp_path)
    token_file = tmp_path / "token"

    async def go(c: httpx.AsyncClient) -> list[int]:
        def post(token: str, id_: str) -> Any:
            return c.post("/restore/events", headers={"Authorization": f"Bearer {token}"},
                          json={"id": id_, "event": "drain_started"})
        codes = [(await post(TOKEN, "a")).status_code]  # 200: the window opens
        token_file.write_text("rotated-" + TOKEN + "\n")
        codes += [(await post(TOKEN, "b")).status_code,  # the old one: 401
                  (await post("rotated-" + TOKEN, "c")).status_code]  # 409: already open
        token_file.write_text("")  # caught half-way: the last good token stays
        codes.append((await post("rotated-" + TOKEN, "d")).status_code)
        return codes

    with capture_logs() as logs:
        codes = env.run(go)
    assert codes == [200, 401, 409, 409]
    events = [e["event"] for e in logs]
    assert "events_token_reloaded" in events and "events_token_unusable" in events
