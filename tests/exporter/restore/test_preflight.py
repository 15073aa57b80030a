"""Preflight probe: a real tiny HTTP server on 127.0.0.1 and httpx.MockTransport."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporter.restore import preflight
from tests.exporter.restore.restore_helpers import MockEngine, make_sidecar, snapshot_obj
from tools.harness import free_port

URL = "http://engine.test/v1/completions"


def probe_with(handler: Any, max_tokens: int = 4, timeout: float = 1.0,
               auth: str | None = None) -> tuple[bool, str]:
    async def go() -> tuple[bool, str]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await preflight.probe(client, URL, max_tokens, timeout, auth)
    return asyncio.run(go())


def answer(status: int = 200, body: Any = None, **kw: Any) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        if body is None:
            return httpx.Response(status, json={"usage": {"completion_tokens": 4}}, **kw)
        if isinstance(body, bytes):
            return httpx.Response(status, content=body, **kw)
        return httpx.Response(status, json=body, **kw)
    return handler


def test_passes_on_200_with_exactly_max_tokens() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"choices": [{"text": "abcd"}],
                                         "usage": {"completion_tokens": 4, "prompt_tokens": 3}})

    assert probe_with(handler, auth="Bearer probe-secret") == (True, "ok")
    req = seen[0]
    assert req.method == "POST" and str(req.url) == URL
    body = json.loads(req.content)
    assert body["max_tokens"] == 4 and body["temperature"] == 0 and body["prompt"]
    assert req.headers["authorization"] == "Bearer probe-secret"


def test_no_auth_header_unless_configured() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"usage": {"completion_tokens": 4}})

    assert probe_with(handler)[0] is True
    assert "authorization" not in seen[0].headers


@pytest.mark.parametrize("tokens", [0, 3, 5, 40, -4, "4", None, 4.5, [4], True])
def test_fails_on_other_counts(tokens: Any) -> None:
    ok, detail = probe_with(answer(body={"usage": {"completion_tokens": tokens}}))
    assert ok is False and "completion_tokens" in detail


def test_bool_is_not_a_count_of_one() -> None:
    ok, _ = probe_with(answer(body={"usage": {"completion_tokens": True}}), max_tokens=1)
    assert ok is False
    assert probe_with(answer(body={"usage": {"completion_tokens": 1}}), max_tokens=1)[0] is True


@pytest.mark.parametrize("status", [201, 204, 301, 302, 400, 401, 404, 429, 500, 503])
def test_fails_on_non_200(status: int) -> None:
    headers = {"Location": "http://elsewhere.test/"} if 300 <= status < 400 else {}
    ok, detail = probe_with(answer(status, headers=headers))
    assert ok is False and detail == f"HTTP {status}"


@pytest.mark.parametrize("body", [
    {}, {"usage": None}, {"usage": {}}, {"usage": "4"}, [1, 2], {"choices": []},
])
def test_fails_without_usage(body: Any) -> None:
    ok, detail = probe_with(answer(body=body))
    assert ok is False and "usage" in detail


@pytest.mark.parametrize("body", [b"not json", b"", b"[" * 17 + b"]" * 17, b"\xff"])
def test_fails_on_a_body_that_is_not_json_within_the_depth_limit(body: bytes) -> None:
    ok, detail = probe_with(answer(body=body))
    assert ok is False and detail.startswith("decode: ")


def test_fails_on_timeout_and_transport_errors() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    ok, detail = probe_with(timeout)
    assert ok is False and detail.startswith("timeout: ")
    ok, detail = probe_with(refused)
    assert ok is False and detail.startswith("connect: ")


# -- a real server on 127.0.0.1 ------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length))
        if self.path == "/slow":
            time.sleep(1.0)
        status = 500 if self.path == "/broken" else 200
        tokens = request["max_tokens"] - (1 if self.path == "/short" else 0)
        payload = json.dumps({"usage": {"completion_tokens": tokens}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def real_probe(url: str, timeout: float = 2.0) -> tuple[bool, str]:
    async def go() -> tuple[bool, str]:
        async with httpx.AsyncClient(trust_env=False) as client:
            return await preflight.probe(client, url, 4, timeout)
    return asyncio.run(go())


def test_real_server(server: str) -> None:
    assert real_probe(f"{server}/v1/completions") == (True, "ok")
    assert real_probe(f"{server}/short")[0] is False
    assert real_probe(f"{server}/broken") == (False, "HTTP 500")
    t0 = time.monotonic()
    ok, detail = real_probe(f"{server}/slow", timeout=0.2)
    assert ok is False and detail.startswith("timeout: ")
    assert time.monotonic() - t0 < 0.9


def test_refused_port() -> None:
    port = free_port()
    ok, detail = real_probe(f"http://127.0.0.1:{port}/v1/completions")
    assert ok is False and detail.startswith("connect: ")


# -- the loop runs the probes while verifying and the window closes once both pass ---------------

def test_keeper_runs_probes_and_closes_the_window(tmp_path: Path) -> None:
    engine = MockEngine(snapshot_obj(admission="draining", inflight=0))
    results = {"direct": [False, True], "routed": [True, True]}
    calls: list[str] = []

    def transport(request: httpx.Request) -> httpx.Response:
        """The engine, and the two completion URLs the sidecar is configured to probe."""
        name = {"engine.test": "direct", "router.test": "routed"}[request.url.host]
        if request.url.path != "/v1/completions":
            assert name == "direct"
            return engine(request)  # type: ignore[no-any-return]
        calls.append(name)
        tokens = 4 if results[name].pop(0) else 2
        return httpx.Response(200, json={"usage": {"completion_tokens": tokens}})

    clock = iter([1000.0 + i for i in range(100)])
    sidecar = make_sidecar(tmp_path, transport, clock=lambda: next(clock),
                           preflight_direct_url=URL,
                           preflight_routed_url="http://router.test/v1/completions")
    loop = sidecar.loop
    assert sidecar.keeper.bounds.preflight == ("direct", "routed")

    async def go() -> None:
        await loop.cycle()  # draining: the window opens
        engine.down = True
        await loop.cycle()
        engine.down = False
        engine.snapshot = snapshot_obj(generation="g2")
        await loop.cycle()  # open again: verifying; the probes run as the keeper's own task
        await sidecar.keeper.settle()  # direct failed, routed passed
        await loop.cycle()
        assert loop.view.restore.state.phase == "verifying"
        assert loop.view.restore.state.window is not None
        await sidecar.keeper.settle()  # direct passes now; routed is not probed again
        await loop.cycle()
        await sidecar.client.aclose()

    asyncio.run(go())
    loop.close()
    assert calls == ["direct", "routed", "direct"]
    state = loop.view.restore.state
    assert state.window is None
    assert state.checks["preflight_direct"] is True and state.checks["preflight_routed"] is True
    assert state.checks["fresh_generation"] is True and state.checks["drained_admission"] is True
    get = sidecar.registry.get_sample_value
    assert get("helios_restore_check_ok", {"check": "preflight_direct"}) == 1


def test_probe_asks_for_exactly_max_tokens_and_names_the_model_only_when_told() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"usage": {"completion_tokens": 3}})

    async def go() -> list[tuple[bool, str]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return [await preflight.probe(client, URL, 3, 1.0),
                    await preflight.probe(client, URL, 3, 1.0, model="qwen3-next")]

    assert [ok for ok, _ in asyncio.run(go())] == [True, True]
    assert "model" not in seen[0] and seen[1]["model"] == "qwen3-next"
    for body in seen:
        assert body["max_tokens"] == 3 and body["min_tokens"] == 3 and body["ignore_eos"] is True


def test_anything_the_transport_raises_is_a_failed_check_never_an_exception() -> None:
    """A probe's failure is a failed check, not a failed poll cycle: even an error that is not
    httpx's (a bug, a broken transport) comes back as (False, why)."""
    def broken(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("not an httpx error")

    def recursion(request: httpx.Request) -> httpx.Response:
        raise RecursionError("deep")

    for handler, name in ((broken, "RuntimeError"), (recursion, "RecursionError")):
        ok, detail = probe_with(handler)
        assert ok is False and detail.startswith("other: ") and detail.endswith(name), detail
