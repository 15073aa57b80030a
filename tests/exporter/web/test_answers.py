"""What every route answers beside its own job: HEAD like GET without a body, no API docs, no
redirect built from the Host header, and the events token guarding GET /experiment/phases."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from tests.exporter.web.authapp import PASSWORD, TOKEN, Sidecar

BEARER = {"Authorization": f"Bearer {TOKEN}"}
GETS = ("/metrics", "/healthz", "/readyz", "/status", "/", "/experiment/phases")


def _basic() -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()}


def test_head_is_answered_like_get_without_a_body(tmp_path: Path) -> None:
    async def go(c: httpx.AsyncClient) -> list[tuple[str, httpx.Response, httpx.Response]]:
        await c.get("/metrics")
        return [(p, await c.get(p, headers=BEARER), await c.head(p, headers=BEARER)) for p in GETS]

    for path, get, head in Sidecar(tmp_path).run(go):
        assert head.status_code == get.status_code, path
        assert head.content == b"", path
        assert head.headers.get("content-type") == get.headers.get("content-type"), path
        if "content-length" in get.headers and path not in ("/status", "/"):  # clocks move
            assert head.headers["content-length"] == get.headers["content-length"], path


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"])
def test_no_api_documentation_is_served(tmp_path: Path, path: str) -> None:
    async def go(c: httpx.AsyncClient) -> httpx.Response:
        return await c.get(path)

    assert Sidecar(tmp_path).run(go).status_code == 404


@pytest.mark.parametrize("host", ["evil.example", "evil.example:1234", "evil.example/x?y"])
def test_a_trailing_slash_is_not_redirected_to_the_host_header(tmp_path: Path,
                                                               host: str) -> None:
    async def go(c: httpx.AsyncClient) -> list[httpx.Response]:
        return [await c.get(p, headers={"Host": host, **BEARER})
                for p in ("/metrics/", "/status/", "/experiment/phases/")]

    for answer in Sidecar(tmp_path).run(go):
        assert answer.status_code == 404
        assert "location" not in answer.headers
        assert "evil" not in str(answer.headers) and "evil" not in answer.text


def test_the_events_token_guards_reading_the_phases(tmp_path: Path) -> None:
    async def go(c: httpx.AsyncClient) -> list[httpx.Response]:
        return [await c.get("/experiment/phases"),
                await c.get("/experiment/phases", headers={"Authorization": "Bearer wrong"}),
                await c.get("/experiment/phases", headers=BEARER)]

    none, wrong, right = Sidecar(tmp_path).run(go)
    assert none.status_code == wrong.status_code == 401
    assert none.headers["www-authenticate"] == "Bearer"
    assert right.status_code == 200 and right.json()["phases"] == []


def test_with_basic_auth_the_bearer_token_reads_the_phases(tmp_path: Path) -> None:
    """One Authorization header: basic auth steps aside for the route the token guards, and
    only for it (every other path still asks for basic auth)."""
    async def go(c: httpx.AsyncClient) -> list[httpx.Response]:
        return [await c.get("/experiment/phases", headers=BEARER),
                await c.get("/experiment/phases", headers=_basic()),
                await c.get("/metrics", headers=BEARER),
                await c.get("/metrics", headers=_basic())]

    phases_bearer, phases_basic, metrics_bearer, metrics_basic = Sidecar(
        tmp_path, users={"prometheus": PASSWORD}).run(go)
    assert phases_bearer.status_code == 200
    assert phases_basic.status_code == 401
    assert metrics_bearer.status_code == 401
    assert metrics_basic.status_code == 200
