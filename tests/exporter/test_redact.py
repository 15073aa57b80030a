"""`--engine-url` with credentials in it: used for every engine request, shown and logged only
with the password hidden (/status, the status page, source errors, every log line)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import httpx
import pytest

from exporter.config import Config
from exporter.redact import redact_url
from exporter.sidecar import build
from tests.helpers import StubEngine
from tools.harness import Procs, wait_until

SECRET = "hunter2-Pa55"


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://admin:{SECRET}@engine:8000", "http://admin:***@engine:8000"),
    (f"https://admin:{SECRET}@engine/v1?x=1", "https://admin:***@engine/v1?x=1"),
    (f"http://admin:{SECRET}@[::1]:8000/", "http://admin:***@[::1]:8000/"),
    (f"http://{SECRET}@engine:8000", "http://***@engine:8000"),  # a user name may be a token
    (f"http://admin:{SECRET}:more@engine/path@x", "http://admin:***@engine/path@x"),
    ("http://engine:8000/a@b", "http://engine:8000/a@b"),
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
])
def test_the_password_is_hidden(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_status_page_and_errors_hide_it_requests_use_it(tmp_path: Path) -> None:
    engine = StubEngine()
    auth: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        auth.append(request.headers.get("authorization"))
        return engine(request)  # type: ignore[no-any-return]

    config = Config(engine_url=f"http://admin:{SECRET}@engine.invalid:8000", state_dir=tmp_path,
                    no_nvml=True)
    sidecar = build(config, transport=httpx.MockTransport(handler))

    async def cycles() -> None:
        await sidecar.loop.cycle()
        engine.status = 500  # now every source error names the URL
        await sidecar.loop.cycle()
        await sidecar.client.aclose()

    asyncio.run(cycles())
    status, page = sidecar.status(), sidecar.page()
    sidecar.close()
    expected = "Basic " + base64.b64encode(f"admin:{SECRET}".encode()).decode()
    assert auth and set(auth) == {expected}
    assert status["engine_url"] == "http://admin:***@engine.invalid:8000"
    errors = [s["last_error"] for s in status["sources"].values() if s.get("last_error")]
    assert any("http://admin:***@engine.invalid:8000/" in e for e in errors), errors
    assert "http://admin:***@engine.invalid:8000" in page
    assert SECRET not in json.dumps(status) and SECRET not in page


def test_the_logs_of_a_real_sidecar_never_show_it(procs: Procs) -> None:
    """At debug level too, where httpx logs every request's URL."""
    _, engine = procs.simulator()
    with_password = engine.replace("http://", f"http://admin:{SECRET}@")
    proc, url = procs.sidecar(with_password, "--poll-interval", "0.3", "--log-level", "debug")
    status = httpx.get(url + "/status", timeout=5).json()
    assert status["engine_url"] == engine.replace("http://", "http://admin:***@")
    assert status["engine_up"] is True  # the credentials reach the engine (it ignores them)
    wait_until(lambda: "HTTP Request: GET" in proc.log.read_text(), 10, "httpx's request lines")
    assert SECRET not in httpx.get(url + "/", timeout=5).text
    log = proc.log.read_text()
    assert SECRET not in log
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    (starting,) = [e for e in events if e["event"] == "sidecar_starting"]
    assert starting["engine_url"] == status["engine_url"]
    assert any(engine.replace("http://", "http://admin:***@") in e["event"] for e in events
               if e.get("logger") == "httpx")
