"""The sidecar's one bounded way out (exporter/sources/http.py), walked over every failure class
against a real raw-socket server on 127.0.0.1 (tests/hostile/stub.py); and the rule that keeps
it the only one: no other module the sidecar runs calls httpx's request methods itself.
"""

from __future__ import annotations

import ast
import asyncio
import gzip
import json
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporter.labels import ErrorReason
from exporter.sources.http import DECODE_STEP, Bounds, FetchError, request, request_json
from tests.hostile.bombs import zeros_gzip
from tests.hostile.stub import (
    METRICS,
    Behaviour,
    Case,
    drip,
    flood,
    hang_up,
    head,
    raw,
    respond,
    running_engine,
    stall,
)
from tools.harness import free_port

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 1 << 20
DEADLINE = 0.5
GIB_OF_ZEROS_IN_GZIP = zeros_gzip(1 << 30)  # ~1 MB


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6)


def call(behaviour: Behaviour, *, deadline: float = DEADLINE, limit: int = LIMIT,
         as_json: bool = False, depth: int = 8, method: str = "GET") -> tuple[Any, float, int]:
    """What one bounded request returned (its body, its parsed JSON or the FetchError), how
    long it took, and the peak of Python allocations meanwhile."""
    async def go(url: str) -> Any:
        async with httpx.AsyncClient(trust_env=False) as client:
            bounds = Bounds(deadline, limit, depth)
            try:
                if as_json:
                    return await request_json(client, method, url, bounds)
                return (await request(client, method, url, bounds)).body
            except FetchError as exc:
                return exc

    with running_engine() as engine:
        engine.case = Case("walk", metrics=behaviour)
        tracemalloc.start()
        t0 = time.monotonic()
        try:
            out = asyncio.run(go(engine.url + METRICS))
            took = time.monotonic() - t0
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return out, took, peak


def ok(body: bytes, headers: dict[str, str] | None = None) -> Behaviour:
    return respond(200, body, headers)


def coded(body: bytes, coding: str) -> Behaviour:
    return respond(200, body, {"Content-Encoding": coding})


@pytest.fixture(autouse=True, scope="module")
def _warm() -> None:
    """One request before any is measured: the first in a process imports what httpx and anyio
    load lazily, which the peak of the first measured request would count (it failed the first
    case, in a worker that had run other files first)."""
    call(ok(b"warm"))


# Every failure class: what the server does -> the closed-set reason.
FAILURES: dict[str, tuple[Behaviour, ErrorReason]] = {
    "hang_up": (hang_up(), ErrorReason.CONNECT),
    "not_http": (raw(b"SSH-2.0-OpenSSH\r\n"), ErrorReason.CONNECT),
    "cut_short": (raw(head(200, length=100) + b"x" * 10), ErrorReason.CONNECT),
    "stall_before_head": (stall(), ErrorReason.TIMEOUT),
    "stall_after_head": (stall(head(200, length=10)), ErrorReason.TIMEOUT),
    "drip_body": (drip(head(200, length=10_000), b"x", interval=0.05), ErrorReason.TIMEOUT),
    "drip_head": (drip(b"", b"HTTP/1.1 200 OK\r\nX: " + b"y" * 100, interval=0.05),
                  ErrorReason.TIMEOUT),
    "http_500": (respond(500, "no"), ErrorReason.HTTP_STATUS),
    "redirect": (respond(302, "", {"Location": "/elsewhere"}), ErrorReason.HTTP_STATUS),
    "declared_too_large": (raw(head(200, length=LIMIT + 1)), ErrorReason.TOO_LARGE),
    "identity_flood": (flood(head(200), b"x" * 65536, 4 * LIMIT), ErrorReason.TOO_LARGE),
    "gzip_bomb_1_gib": (coded(GIB_OF_ZEROS_IN_GZIP, "gzip"), ErrorReason.TOO_LARGE),
    "gzip_stream_of_zeros": (flood(head(200, {"Content-Encoding": "gzip"}),
                                   GIB_OF_ZEROS_IN_GZIP[:65536], 1 << 30), ErrorReason.TOO_LARGE),
    "double_gzip": (coded(zeros_gzip(64 << 20, 2), "gzip, gzip"), ErrorReason.DECODE),
    "double_gzip_two_headers": (raw(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                                    b"Content-Encoding: gzip\r\nConnection: close\r\n\r\n"
                                    + zeros_gzip(64 << 20, 2)), ErrorReason.DECODE),
    "deflate": (coded(zlib.compress(b"{}"), "deflate"), ErrorReason.DECODE),
    "br": (coded(b"\x0b\x01\x80{}\x03", "br"), ErrorReason.DECODE),
    "zstd": (coded(b"(\xb5/\xfd", "zstd"), ErrorReason.DECODE),
    "unknown_coding": (coded(b"{}", "x-helios-secret"), ErrorReason.DECODE),
    "gzip_not_gzip": (coded(b"\x1f\x8bnot gzip at all", "gzip"), ErrorReason.DECODE),
    "gzip_cut_short": (coded(_gz(b"x" * 1000)[:-12], "gzip"), ErrorReason.DECODE),
    "gzip_bad_crc": (coded(_gz(b"x" * 1000)[:-8] + b"\0" * 8, "gzip"), ErrorReason.DECODE),
    "gzip_then_more": (coded(_gz(b"{}") + _gz(b"{}"), "gzip"), ErrorReason.DECODE),
}


@pytest.mark.parametrize("name", FAILURES)
def test_every_failure_class_is_a_closed_set_reason_within_the_deadline(name: str) -> None:
    behaviour, reason = FAILURES[name]
    # The deadline is short where it is what fails the request; elsewhere it is long enough
    # that a loaded machine never turns another failure into a timeout.
    deadline = DEADLINE if reason is ErrorReason.TIMEOUT else 10.0
    out, took, peak = call(behaviour, deadline=deadline)
    assert isinstance(out, FetchError), out[:100] if isinstance(out, bytes) else out
    assert out.reason is reason, (out.reason, str(out))
    assert took < deadline + 1.0
    # Memory never follows what the server claims or inflates to: the limit, a decoding step
    # and the raw chunks in flight, whatever was sent (1 GiB of zeros among them).
    assert peak < 4 * LIMIT + 4 * DECODE_STEP, f"{peak} bytes allocated at the peak"
    assert "x-helios-secret" not in str(out)


def test_refused_port_is_connect() -> None:
    async def go() -> FetchError:
        async with httpx.AsyncClient(trust_env=False) as client:
            with pytest.raises(FetchError) as caught:
                await request(client, "GET", f"http://127.0.0.1:{free_port()}/", Bounds(1, 10))
            return caught.value
    assert asyncio.run(go()).reason is ErrorReason.CONNECT


def test_anything_else_that_goes_wrong_is_other() -> None:
    """Not an httpx transport error (a URL httpx refuses, a header it cannot send, a broken
    transport): still a FetchError with a closed-set reason, never an exception of its own."""
    def broken(req: httpx.Request) -> httpx.Response:
        raise RuntimeError("a transport bug")

    async def go() -> list[FetchError]:
        out = []
        async with httpx.AsyncClient(transport=httpx.MockTransport(broken)) as client:
            for url, headers in (("http://engine.test/", {}), ("http://[::1/", {}),
                                 ("http://engine.test/", {"X-Bad": "line\nbreak"})):
                with pytest.raises(FetchError) as caught:
                    await request(client, "GET", url, Bounds(1, 10), headers=headers)
                out.append(caught.value)
        return out
    assert [e.reason for e in asyncio.run(go())] == [ErrorReason.OTHER] * 3


@pytest.mark.parametrize("coding", ["gzip", "GZIP", " gzip ", None, "identity", ""])
def test_the_coding_asked_for_or_none_is_decoded(coding: str | None) -> None:
    text = json.dumps({"usage": {"completion_tokens": 4}, "pad": "z" * 200_000}).encode()
    body = _gz(text) if coding is not None and coding.strip().lower() == "gzip" else text
    headers = {} if coding is None else {"Content-Encoding": coding}
    assert call(ok(body, headers))[0] == text
    parsed = call(ok(body, headers), as_json=True)[0]
    assert parsed["usage"] == {"completion_tokens": 4}


def test_a_body_decoding_to_exactly_the_limit_passes() -> None:
    assert call(coded(_gz(b"a" * LIMIT), "gzip"))[0] == b"a" * LIMIT
    out = call(coded(_gz(b"a" * (LIMIT + 1)), "gzip"))[0]
    assert isinstance(out, FetchError) and out.reason is ErrorReason.TOO_LARGE


@pytest.mark.parametrize("body", [b"[" * 9 + b"]" * 9, b'{"a":' * 9 + b"1" + b"}" * 9,
                                  b"[" * 100_000, b"{" * 100_000, b"not json", b"\xff\xfe",
                                  b'{"a": NaN}'])
def test_json_past_the_depth_or_not_json_is_decode(body: bytes) -> None:
    for sent in (ok(body), coded(_gz(body), "gzip")):
        out = call(sent, as_json=True, depth=8)[0]
        assert isinstance(out, FetchError) and out.reason is ErrorReason.DECODE, out
        assert "RecursionError" not in str(out)


def test_json_at_the_depth_limit_passes() -> None:
    body = b"[" * 8 + b"]" * 8
    assert call(ok(body), as_json=True, depth=8)[0] == [[[[[[[[]]]]]]]]


def test_a_redirect_is_not_followed() -> None:
    with running_engine() as engine:
        engine.case = Case("redirect", metrics=respond(302, "", {"Location": "/health"}))

        async def go() -> FetchError:
            async with httpx.AsyncClient(trust_env=False) as client:
                with pytest.raises(FetchError) as caught:
                    await request(client, "GET", engine.url + METRICS, Bounds(1, 10))
                return caught.value
        out = asyncio.run(go())
        assert out.status == 302
        assert engine.count("redirect", "/health") == 0


def test_asks_for_gzip_only_whatever_the_client_default() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, content=b"{}")

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     headers={"Accept-Encoding": "gzip, deflate, br"}) as client:
            await request(client, "GET", "http://engine.test/x", Bounds(1, 10),
                          headers={"accept-encoding": "br"})
    asyncio.run(go())
    assert seen[0].headers.get_list("accept-encoding") == ["gzip"]


def test_decoding_a_bomb_leaves_the_event_loop_its_turns() -> None:
    """1 GiB of gzip'd zeros against an 8 MiB limit: the loop is never held for long. Measured
    in CPU time of the loop's thread between two turns, which a loaded machine does not
    stretch (wall time would count the time the process waits for a core)."""
    gaps: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        last = time.thread_time()
        while not stop.is_set():
            await asyncio.sleep(0)
            now = time.thread_time()
            gaps.append(now - last)
            last = now

    async def go(url: str) -> FetchError:
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop))
        async with httpx.AsyncClient(trust_env=False) as client:
            try:
                await request(client, "GET", url, Bounds(5.0, 8 << 20))
            except FetchError as exc:
                return exc
            finally:
                stop.set()
                await tick
        raise AssertionError("the bomb was accepted")

    with running_engine() as engine:
        engine.case = Case("bomb", metrics=coded(GIB_OF_ZEROS_IN_GZIP, "gzip"))
        out = asyncio.run(go(engine.url + METRICS))
    assert out.reason is ErrorReason.TOO_LARGE
    assert len(gaps) > 50, "the loop never got a turn while the body was decoded"
    assert max(gaps) < 0.05, f"the event loop was held for {max(gaps):.3f}s of CPU"
    print(f"{len(gaps)} turns, the longest after {max(gaps) * 1000:.1f} ms of CPU")


# -- nothing else goes out ---------------------------------------------------------------------

REQUEST_METHODS = {"request", "stream", "send", "get", "post", "put", "patch", "delete", "head",
                   "options"}
THE_PATH = "exporter/sources/http.py"
# Commands run by an operator on their own terminal (never by `serve`), with httpx clients of
# their own: they talk to the sidecar's API, or drive an engine in an experiment. They are the
# lab's (lab/), outside the sidecar package the rule reads.
OPERATOR_COMMANDS = {
    "lab/status/command.py", "lab/client/sidecar.py",
    "lab/observer_cost/run.py", "lab/probe/send.py",
    "lab/demo/stack.py", "lab/demo/command.py", "lab/demo/alerts.py",
}


def _httpx_calls(path: Path) -> list[str]:
    """httpx's request functions, called or passed on (`httpx.get`), and request methods called
    on something named like a client (`client.post(...)`, `self._http.stream(...)`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func
            named = ast.unparse(attr.value).rsplit(".", 1)[-1].lower()
            if attr.attr in REQUEST_METHODS and named.endswith(("client", "http")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(attr)}")
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "httpx" and node.attr in REQUEST_METHODS):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_but_the_path_calls_httpx_request_methods() -> None:
    calls = []
    for path in sorted((ROOT / "exporter").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel == THE_PATH or rel in OPERATOR_COMMANDS:
            continue
        calls += _httpx_calls(path)
    assert calls == [], "requests outside exporter/sources/http.py:\n" + "\n".join(calls)
    # The rule can fail: the path itself and the operator commands are caught by it.
    assert _httpx_calls(ROOT / THE_PATH)
    assert all(_httpx_calls(ROOT / rel) for rel in OPERATOR_COMMANDS), "stale exemption"


@pytest.mark.e2e
def test_serve_imports_none_of_the_operator_commands() -> None:
    code = ("import sys, exporter.cli, exporter.sidecar; "
            "print('\\n'.join(m for m in sys.modules if m.startswith(('exporter', 'lab'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    loaded = {m.replace(".", "/") + ".py" for m in out}
    assert "exporter/sources/http.py" in loaded
    assert loaded & OPERATOR_COMMANDS == set()
