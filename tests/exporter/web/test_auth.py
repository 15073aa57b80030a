"""Failed credentials: counted by path, logged without the secret, repeated ones slowed down;
basic auth through the real app (ASGI) with the web configuration's users."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from exporter.app import build_app
from exporter.web import basic_auth
from exporter.web.auth import AuthFailures
from exporter.web.guard import WebGuard
from tests.helpers import StubEngine, make_sidecar
from tools.pki import write_web_config

TOKEN = "events-Token-0123456789abcdef"
PASSWORD = "correct horse battery staple"


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


class Sidecar:
    def __init__(self, tmp_path: Path, failures: AuthFailures | None = None, **web: Any) -> None:
        """`web`: write_web_config's arguments (users, extra, cost)."""
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN)
        extra: dict[str, Any] = {"events_token_file": token_file}
        if web:
            extra["web_config_file"] = write_web_config(tmp_path / "web.yml", **web)
        self.sidecar = make_sidecar(StubEngine(), tmp_path / "state", **extra)
        if failures is not None:  # with a clock of the test's (its counts are not exported then)
            self.sidecar.auth_failures = failures
        app: Any = build_app(self.sidecar.loop, self.sidecar.cache, self.sidecar.status,
                             self.sidecar.events_token, self.sidecar.phases, page=self.sidecar.page,
                             auth_failures=self.sidecar.auth_failures)
        if self.sidecar.web is not None:
            app = WebGuard(app, self.sidecar.web, self.sidecar.auth_failures)
        self.app = app

    def run(self, fn: Callable[[httpx.AsyncClient], Coroutine[Any, Any, Any]]) -> Any:
        async def go() -> Any:
            await self.sidecar.loop.cycle()
            transport = httpx.ASGITransport(app=self.app, client=("10.1.2.3", 40000))
            async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as c:
                result = await fn(c)
            await self.sidecar.client.aclose()
            self.sidecar.close()
            return result
        return asyncio.run(go())

    def failures(self, path: str, reason: str) -> float | None:
        return self.sidecar.registry.get_sample_value(  # type: ignore[no-any-return]
            "helios_exporter_http_auth_failures_total", {"path": path, "reason": reason})


def _logged(logs: list[dict[str, Any]]) -> str:
    return json.dumps(logs, default=str)


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
    text = _logged(logs)
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


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def bcrypt_calls(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The hashes bcrypt was run against (bcrypt itself still runs)."""
    calls: list[bytes] = []
    real = basic_auth.check_password

    def counting(password: bytes, hashed: bytes) -> bool:
        calls.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(basic_auth, "check_password", counting)
    return calls


def test_basic_auth_guards_everything_but_probes_and_bearer_apis(
        tmp_path: Path, bcrypt_calls: list[bytes]) -> None:
    env = Sidecar(tmp_path, users={"prometheus": PASSWORD})

    async def go(c: httpx.AsyncClient) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for path in ("/metrics", "/status", "/", "/openapi.json", "/anything",
                     "/experiment/phases"):
            out[f"none {path}"] = await c.get(path)
        out["wrong"] = await c.get("/metrics", headers=_basic("prometheus", "nope"))
        out["unknown user"] = await c.get("/metrics", headers=_basic("eve", PASSWORD))
        out["garbage"] = await c.get("/metrics", headers={"Authorization": "Basic %%%"})
        out["right"] = await c.get("/metrics", headers=_basic("prometheus", PASSWORD))
        out["right again"] = await c.get("/status", headers=_basic("prometheus", PASSWORD))
        out["healthz"] = await c.get("/healthz")
        out["readyz"] = await c.get("/readyz")
        out["events"] = await c.post("/restore/events", json={"id": "x", "event": "drain_started"},
                                     headers={"Authorization": f"Bearer {TOKEN}"})
        return out

    with capture_logs() as logs:
        out = env.run(go)
    for path in ("/metrics", "/status", "/", "/openapi.json", "/anything", "/experiment/phases"):
        answer = out[f"none {path}"]
        assert answer.status_code == 401, path
        assert answer.headers["www-authenticate"].startswith("Basic realm=")
    assert out["wrong"].status_code == out["unknown user"].status_code == 401
    assert out["garbage"].status_code == 401
    assert out["right"].status_code == 200 and b"helios_engine_up" in out["right"].content
    assert out["right again"].status_code == 200
    assert out["healthz"].status_code == out["readyz"].status_code == 200
    assert out["events"].status_code == 200  # its bearer token, not basic auth
    # bcrypt: the wrong password, the unknown user (a dummy hash of the same cost), the right
    # password once: the second request with it was answered from the cache.
    assert len(bcrypt_calls) == 3
    hashes = env.sidecar.web.config.users
    assert bcrypt_calls[0] == bcrypt_calls[2] == hashes["prometheus"]
    assert bcrypt_calls[1] != hashes["prometheus"] and bcrypt_calls[1][:7] == b"$2b$04$"
    assert env.failures("/metrics", "missing") == 1
    assert env.failures("/metrics", "wrong") == 3
    assert env.failures("other", "missing") == 2
    assert env.failures("/experiment/phases", "missing") == 1  # GET: no token of its own
    assert env.failures("/", "missing") == 1
    failed = [e for e in logs if e["event"] == "auth_failed"]
    assert [e["user"] for e in failed] == ["prometheus", "(not a configured user)",
                                           "(not a configured user)"]
    text = _logged(logs)
    assert PASSWORD not in text
    assert '"nope"' not in text and '"eve"' not in text
    assert hashes["prometheus"].decode() not in text


def test_configured_headers_and_the_rate_limit(tmp_path: Path) -> None:
    env = Sidecar(tmp_path, users={"p": PASSWORD}, extra=(
        "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
        "rate_limit:\n  interval: 1h\n  burst: 2\n"))

    async def go(c: httpx.AsyncClient) -> list[httpx.Response]:
        return [await c.get("/metrics", headers=_basic("p", PASSWORD)) for _ in range(3)] + [
            await c.get("/healthz")]

    first, second, third, health = env.run(go)
    assert first.status_code == second.status_code == 200
    assert first.headers["x-content-type-options"] == "nosniff"
    assert third.status_code == 429
    assert health.status_code == 200  # probes are never rate limited


def test_verified_credentials_pass_while_their_address_is_slowed_down(
        tmp_path: Path, bcrypt_calls: list[bytes]) -> None:
    """Prometheus shares its address with something that keeps failing: its password, verified
    before, still gets through (from the success cache, no bcrypt); everything else waits out
    the penalty unseen, and the cache itself is compared with at most once a second."""
    now = [1000.0]
    failures = AuthFailures(clock=lambda: now[0], first=30.0)
    env = Sidecar(tmp_path, failures, users={"prometheus": PASSWORD, "alice": "alice-Pa55"})
    right = _basic("prometheus", PASSWORD)

    async def go(c: httpx.AsyncClient) -> dict[str, Any]:
        out: dict[str, Any] = {"first": (await c.get("/metrics", headers=right)).status_code}
        out["guesses"] = [(await c.get("/metrics", headers=_basic("prometheus", f"guess-{i}")))
                          .status_code for i in range(6)]  # five free, the sixth: 30 s penalty
        before = len(bcrypt_calls)
        out["scrape"] = (await c.get("/metrics", headers=right)).status_code
        out["status"] = (await c.get("/status", headers=right)).status_code
        out["guess"] = (await c.get("/metrics", headers=_basic("prometheus", "guess-6"))).status_code
        out["bcrypt"] = len(bcrypt_calls) - before
        # Three comparisons in a burst are used up: the right password waits too, for a second.
        out["rationed"] = (await c.get("/metrics", headers=right)).status_code
        now[0] += 1.0
        out["a second later"] = (await c.get("/metrics", headers=right)).status_code
        # Right, but never verified: waits out the penalty (no bcrypt during a penalty).
        now[0] += 1.0
        out["alice"] = (await c.get("/metrics", headers=_basic("alice", "alice-Pa55"))).status_code
        out["bcrypt after"] = len(bcrypt_calls) - before
        out["throttled clients"] = failures.throttled_clients()
        return out

    out = env.run(go)
    assert out["first"] == 200
    assert out["guesses"] == [401] * 6
    assert out["scrape"] == out["status"] == 200  # from the cache, inside the penalty
    assert out["guess"] == 429 and out["bcrypt"] == 0
    assert out["rationed"] == 429 and out["a second later"] == 200
    assert out["alice"] == 429 and out["bcrypt after"] == 0
    # The cached successes did not wipe out the record of the failing neighbour.
    assert out["throttled clients"] == 1
    assert failures.counts[("/metrics", "wrong")] == 6
    assert failures.counts[("/metrics", "throttled")] == 3


def test_a_check_not_done_in_time_is_answered_429_and_counted_pending(tmp_path: Path) -> None:
    """A cost-12 hash (about 0.3 s a check) and an answer due at once: 429 with Retry-After,
    counted as pending, not as a failure; the check goes on, and once it is done the same
    credentials pass from the cache."""
    env = Sidecar(tmp_path, users={"prometheus": PASSWORD}, cost=12)
    assert env.sidecar.web is not None
    env.app = WebGuard(env.app.app, env.sidecar.web, env.sidecar.auth_failures,
                       basic_auth.BasicAuth(answer_within=0.01))
    guard = env.app

    async def go(c: httpx.AsyncClient) -> list[httpx.Response]:
        first = await c.get("/metrics", headers=_basic("prometheus", PASSWORD))
        for _ in range(200):
            if guard.basic.checks_running == 0:
                break
            await asyncio.sleep(0.05)
        return [first, await c.get("/metrics", headers=_basic("prometheus", PASSWORD))]

    first, second = env.run(go)
    assert first.status_code == 429 and first.headers["retry-after"] == "1"
    assert b"still being checked" in first.content
    assert second.status_code == 200
    assert env.failures("/metrics", "pending") == 1
    assert env.failures("/metrics", "wrong") == 0


def test_exporter_toolkits_zero_burst_and_a_numeric_header(tmp_path: Path) -> None:
    """`X-XSS-Protection: 1` (a YAML number) is sent as "1"; an interval with `burst: 0` lets no
    request through, as exporter-toolkit's limiter, but the probes; `interval: 0` is no limit."""
    for name in ("closed", "open"):
        (tmp_path / name).mkdir()
    closed = Sidecar(tmp_path / "closed", extra=(
        "http_server_config:\n  headers:\n    X-XSS-Protection: 1\n"
        "rate_limit:\n  interval: 1s\n  burst: 0\n"))

    async def go(c: httpx.AsyncClient) -> list[httpx.Response]:
        return [await c.get("/status"), await c.get("/status"), await c.get("/healthz")]

    first, second, health = closed.run(go)
    assert first.status_code == second.status_code == 429
    assert health.status_code == 200 and health.headers["x-xss-protection"] == "1"
    open_ = Sidecar(tmp_path / "open", extra="rate_limit:\n  interval: 0\n  burst: 0\n")

    async def many(c: httpx.AsyncClient) -> list[int]:
        return [(await c.get("/status")).status_code for _ in range(30)]

    assert open_.run(many) == [200] * 30


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
