"""POST /restore/events through the real app (ASGI), against a mock engine."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from structlog.testing import capture_logs

from exporter.app import build_app
from exporter.restore.events import MAX_BODY_BYTES
from exporter.restore.store import StateStore
from tests.exporter.restore.restore_helpers import MockEngine, make_sidecar

TOKEN = "s3cr3t-Token-0123456789abcdef"
NOW = 1764389520.5
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Env:
    def __init__(self, state_dir: Path, token: str | None = TOKEN,
                 engine: MockEngine | None = None) -> None:
        extra: dict[str, Any] = {}
        if token is not None:
            token_file = state_dir.parent / "events-token"
            token_file.write_text(f"  {token}\n")  # surrounding whitespace is not part of it
            extra["events_token_file"] = token_file
        self.now = NOW  # the sidecar's wall clock: tests move it
        self.sidecar = make_sidecar(state_dir, engine, clock=lambda: self.now, **extra)
        self.loop = self.sidecar.loop
        self.app = build_app(self.loop, self.sidecar.cache, self.sidecar.status,
                             self.sidecar.events_token)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                 base_url="http://sidecar")

    def run(self, fn: Callable[[httpx.AsyncClient], Coroutine[Any, Any, Any]]) -> Any:
        async def go() -> Any:
            async with self.client() as c:
                return await fn(c)
        return asyncio.run(go())

    def post(self, body: Any = None, headers: dict[str, str] | None = None,
             content: bytes | None = None) -> httpx.Response:
        async def go(c: httpx.AsyncClient) -> httpx.Response:
            if content is not None:
                return await c.post("/restore/events", content=content, headers=headers or {})
            return await c.post("/restore/events", json=body, headers=headers or {})
        resp: httpx.Response = self.run(go)
        return resp

    def counter(self, event: str, result: str) -> float | None:
        return self.sidecar.registry.get_sample_value(
            "helios_restore_events_total", {"event": event, "result": result})


@pytest.fixture
def env(tmp_path: Path) -> Env:
    (tmp_path / "state").mkdir()
    return Env(tmp_path / "state")


def test_no_token_file_disables_the_endpoint(tmp_path: Path) -> None:
    e = Env(tmp_path / "state", token=None)
    for headers in ({}, AUTH):
        resp = e.post({"id": "a", "event": "drain_started"}, headers)
        assert resp.status_code == 404
    assert e.loop.view.restore.state.window is None


@pytest.mark.parametrize("header", [
    None,
    "",
    "Bearer",
    "Bearer ",
    "Bearer wrong",
    f"Bearer {TOKEN[:-1]}",  # a prefix of the right token
    f"Bearer {TOKEN[:8]}",
    f"Bearer {TOKEN}x",  # longer
    f"Bearer {TOKEN.upper()}",
    f"Basic {TOKEN}",
    TOKEN,  # no scheme
    f"Bearer{TOKEN}",
])
def test_missing_or_wrong_token_is_401_and_changes_nothing(env: Env, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    resp = env.post({"id": "a", "event": "drain_started"}, headers)
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == "Bearer"
    assert TOKEN not in resp.text and TOKEN[:8] not in resp.text
    assert env.loop.view.restore.state.window is None
    assert env.loop.view.restore.state.event_ids == ()
    assert not (env.loop.view.restore.state_file).exists()


def test_auth_is_checked_before_the_body(env: Env) -> None:
    assert env.post(content=b"not json", headers={"Authorization": "Bearer nope"}).status_code == 401
    big = b"x" * (MAX_BODY_BYTES + 10)
    assert env.post(content=big, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_right_token_opens_the_window(env: Env) -> None:
    resp = env.post({"id": "drain-1", "event": "drain_started", "note": "maintenance"}, AUTH)
    assert resp.status_code == 200
    assert resp.json() == {"accepted": True, "duplicate": False, "phase": "draining",
                           "window_open": True, "window_start": NOW,
}
    state = env.loop.view.restore.state
    assert state.window is not None and state.window.start == NOW and state.window.cause == "event"
    assert env.counter("drain_started", "accepted") == 1
    assert env.sidecar.registry.get_sample_value("helios_restore_window_open") == 1
    assert env.sidecar.registry.get_sample_value(
        "helios_restore_window_start_timestamp_seconds") == NOW
    saved = StateStore(env.loop.view.restore.state_file.parent).load()
    assert saved is not None and saved.window is not None and saved.event_ids == ("drain-1",)


def test_scheme_is_case_insensitive(env: Env) -> None:
    resp = env.post({"id": "a", "event": "drain_started"}, {"Authorization": f"bearer {TOKEN}"})
    assert resp.status_code == 200


def test_repeated_id_is_applied_once(env: Env) -> None:
    first = env.post({"id": "ev-1", "event": "drain_started"}, AUTH)
    env.now = NOW + 100
    again = env.post({"id": "ev-1", "event": "drain_started"}, AUTH)
    # The same id for another kind: another event under a used name, refused, not applied.
    other_kind = env.post({"id": "ev-1", "event": "abort"}, AUTH)
    assert first.json()["duplicate"] is False
    assert again.status_code == 200
    body = again.json()
    assert body["duplicate"] is True and body["accepted"] is False
    assert body["window_open"] is True and body["window_start"] == NOW
    assert other_kind.status_code == 409
    refused = other_kind.json()
    assert refused["accepted"] is False and refused["duplicate"] is False
    assert "drain_started" in refused["detail"] and refused["window_open"] is True
    state = env.loop.view.restore.state
    assert state.event_ids == ("ev-1",)
    assert state.window is not None and state.window.start == NOW
    assert env.counter("drain_started", "accepted") == 1
    assert env.counter("drain_started", "duplicate") == 1
    assert env.counter("abort", "refused") == 1
    assert env.counter("abort", "accepted") == 0  # exported at 0, never incremented


def test_duplicate_ids_survive_a_restart(env: Env, tmp_path: Path) -> None:
    assert env.post({"id": "ev-1", "event": "drain_started"}, AUTH).status_code == 200
    again = Env(tmp_path / "state")
    again.loop.load_state()
    resp = again.post({"id": "ev-1", "event": "drain_started"}, AUTH)
    assert resp.json()["duplicate"] is True
    # The kind it was used for survives too: the same id for abort is refused.
    assert again.post({"id": "ev-1", "event": "abort"}, AUTH).status_code == 409
    assert again.loop.view.restore.state.window is not None


def test_window_closed_and_abort_events(env: Env) -> None:
    env.post({"id": "1", "event": "drain_started"}, AUTH)
    env.now = NOW + 50
    closed = env.post({"id": "2", "event": "window_closed"}, AUTH).json()
    assert closed["window_open"] is False and closed["phase"] == "serving"
    last = env.loop.view.restore.state.last_window
    assert last is not None and last.end - last.start == 50
    env.post({"id": "3", "event": "drain_started"}, AUTH)
    assert env.post({"id": "4", "event": "abort"}, AUTH).json()["window_open"] is False
    assert env.loop.view.restore.state.last_window.outcome == "aborted"  # type: ignore[union-attr]


def test_window_closed_while_the_engine_is_unreachable_is_409(tmp_path: Path) -> None:
    engine = MockEngine()
    (tmp_path / "state").mkdir()
    e = Env(tmp_path / "state", engine=engine)

    async def cycle(at: float) -> None:
        e.now = at
        await e.loop.cycle()

    e.run(lambda _: cycle(NOW))
    engine.down = True
    e.run(lambda _: cycle(NOW + 5))
    e.run(lambda _: cycle(NOW + 20))  # past the 10 s grace: the window opened at NOW + 5
    start = e.loop.view.restore.state.window.start  # type: ignore[union-attr]
    assert start == NOW + 5
    resp = e.post({"id": "close-1", "event": "window_closed"}, AUTH)
    assert resp.status_code == 409
    body = resp.json()
    assert body["accepted"] is False and body["window_open"] is True
    assert body["window_start"] == start and "unreachable" in body["detail"]
    assert e.counter("window_closed", "refused") == 1
    state = e.loop.view.restore.state
    assert state.window is not None and "close-1" not in state.event_ids
    assert StateStore(tmp_path / "state").load().window.start == start  # type: ignore[union-attr]
    # The engine answers again: the window closes by itself, with its start; the refused id was
    # not recorded, so sending it again is not a duplicate.
    engine.down = False
    e.run(lambda _: cycle(NOW + 30))
    assert e.loop.view.restore.state.last_window.start == start  # type: ignore[union-attr]
    # Sent again now, it is refused for another reason (no window is open), not a duplicate.
    again = e.post({"id": "close-1", "event": "window_closed"}, AUTH)
    assert again.status_code == 409 and again.json()["duplicate"] is False
    assert "no window is open" in again.json()["detail"]


def test_body_over_the_limit_is_413(env: Env) -> None:
    body = json.dumps({"id": "a", "event": "drain_started", "note": "x" * MAX_BODY_BYTES}).encode()
    assert env.post(content=body, headers=AUTH).status_code == 413

    async def chunked(c: httpx.AsyncClient) -> httpx.Response:
        async def gen() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b" " * 1000  # no Content-Length: the limit holds on the stream itself
        return await c.post("/restore/events", content=gen(), headers=AUTH)

    resp = env.run(chunked)
    assert resp.status_code == 413
    assert env.post(content=b"1", headers={**AUTH, "Content-Length": "abc"}).status_code in (
        400, 413)
    assert env.loop.view.restore.state.window is None


MARK = "MARKER9q7z"


@pytest.mark.parametrize("body", [
    {"id": "a", "event": f"{MARK}_started"},
    {"id": MARK + "x" * 60, "event": "drain_started"},  # 70 chars
    {"id": "", "event": "drain_started"},
    {"id": f"{MARK}\nnewline", "event": "drain_started"},
    {"id": "a", "event": "drain_started", "note": MARK * 30},  # 300 chars
    {"id": "a", "event": "drain_started", "note": 7},
    {"event": "drain_started", "note": MARK},
    {"id": 12345, "event": "drain_started", "note": MARK},
    [MARK],
    MARK,
    None,
])
def test_schema_errors_are_422_without_echo(env: Env, body: Any) -> None:
    resp = env.post(body, AUTH)
    assert resp.status_code == 422
    assert MARK not in resp.text
    assert resp.json()["detail"]
    assert env.loop.view.restore.state.window is None and env.loop.view.restore.state.event_ids == ()


@pytest.mark.parametrize("raw", [b"", f"{MARK} not json".encode(), b"{", b"\xff\xfe" + MARK.encode(),
                                 b"[" * 3000])
def test_invalid_json_is_422_without_echo(env: Env, raw: bytes) -> None:
    resp = env.post(content=raw, headers={**AUTH, "Content-Type": "application/json"})
    assert resp.status_code == 422
    assert MARK not in resp.text


def test_ids_with_spaces_and_unknown_fields_are_accepted(env: Env) -> None:
    # docs/interface.md section 6: an id is any unique 1-64 characters; unknown fields are ignored.
    resp = env.post({"id": "restore #3 (db-7)", "event": "drain_started", "by": "tool"}, AUTH)
    assert resp.status_code == 200 and resp.json()["accepted"] is True
    assert env.loop.view.restore.state.event_ids == ("restore #3 (db-7)",)


def test_token_never_logged(env: Env) -> None:
    with capture_logs() as logs:
        env.post({"id": "a", "event": "drain_started", "note": "n"}, AUTH)
        env.post({"id": "a", "event": "drain_started"}, AUTH)
        env.post({"id": "b", "event": "drain_started"}, {"Authorization": f"Bearer {TOKEN[:-1]}"})
        env.post({"id": "c", "event": "bogus"}, AUTH)
    text = repr(logs)
    audit = [e for e in logs if e["event"] == "restore_event"]
    assert len(audit) == 2 and audit[0]["event_id"] == "a" and audit[1]["duplicate"] is True
    assert TOKEN not in text and TOKEN[:-1] not in text and TOKEN[8:20] not in text

    async def status(c: httpx.AsyncClient) -> str:
        return (await c.get("/status")).text + (await c.get("/metrics")).text

    assert TOKEN not in env.run(status)


def test_openapi_declares_the_request_body(env: Env) -> None:
    op = env.app.openapi()["paths"]["/restore/events"]["post"]
    body = op["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {"id", "event", "note"}
    assert body["required"] == ["id", "event"] and body.get("additionalProperties", True) is True
    assert {"200", "401", "404", "413", "422"} <= set(op["responses"])


# -- schemathesis: no 5xx for anything generated from the schema -----------------------------------

# schemathesis.pytest.from_fixture does not work with pytest 9 (Function._nodeid is gone), so the
# schema is loaded from an app built at import time; its state lives in a temporary directory.
_SCHEMA_DIR = tempfile.TemporaryDirectory(prefix="restore-events-schema-")
(Path(_SCHEMA_DIR.name) / "state").mkdir()
_SCHEMA_ENV = Env(Path(_SCHEMA_DIR.name) / "state")
# The schema as the app builds it (it serves no /openapi.json), called against the app.
schema = schemathesis.openapi.from_dict(_SCHEMA_ENV.app.openapi())
schema.app = _SCHEMA_ENV.app
schema = schema.include(path="/restore/events", method="POST")


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_events_api_never_5xx(case: Any) -> None:
    response = case.call(headers=AUTH)
    case.validate_response(response, checks=[not_a_server_error])
    # 405: negative phase; 409: an event that changes nothing in this state
    assert response.status_code in (200, 405, 409, 413, 422), response.text
    assert TOKEN not in response.text
