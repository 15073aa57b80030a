"""Basic auth through the real app (ASGI) with the web configuration's users: what it guards,
its headers and rate limit, verified credentials while their address is slowed down, a check
not done in time (the order of checks alone: test_basic_auth.py)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from exporter.web import basic_auth
from exporter.web.auth import AuthFailures
from exporter.web.guard import WebGuard
from tests.exporter.web.authapp import PASSWORD, TOKEN, Sidecar, logged


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
    for path in ("/metrics", "/status", "/", "/openapi.json", "/anything"):
        answer = out[f"none {path}"]
        assert answer.status_code == 401, path
        assert answer.headers["www-authenticate"].startswith("Basic realm=")
    # GET /experiment/phases: the events token guards it (basic auth steps aside for it)
    assert out["none /experiment/phases"].status_code == 401
    assert "basic" not in out["none /experiment/phases"].headers.get("www-authenticate", "").lower()
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
    assert env.failures("/experiment/phases", "missing") == 1  # GET: its bearer token missing
    assert env.failures("/", "missing") == 1
    failed = [e for e in logs if e["event"] == "auth_failed"]
    assert [e["user"] for e in failed] == ["prometheus", "(not a configured user)",
                                           "(not a configured user)"]
    text = logged(logs)
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
