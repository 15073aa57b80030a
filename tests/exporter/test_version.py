"""One version, pyproject.toml's: what `--version`, build info, the app's OpenAPI document and
the User-Agent of every request the sidecar makes all say."""

from __future__ import annotations

import argparse
import asyncio
import tomllib
from importlib.metadata import version
from pathlib import Path

import httpx

from exporter.app import build_app
from exporter.config import Config
from exporter.sidecar import build
from exporter.version import USER_AGENT, VERSION
from lab.client.sidecar import connect
from tests.conftest import ROOT
from tests.helpers import StubEngine


def test_the_version_is_pyprojects() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert VERSION == version("helios-exporter") == declared
    assert f"helios-exporter/{declared}" == USER_AGENT


def test_the_engine_and_the_app_see_the_version(tmp_path: Path) -> None:
    engine = StubEngine()
    agents: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        agents.append(request.headers["user-agent"])
        return engine(request)  # type: ignore[no-any-return]

    sidecar = build(Config(engine_url="http://engine.invalid", state_dir=tmp_path, no_nvml=True),
                    transport=httpx.MockTransport(handler))
    app = build_app(sidecar.loop, sidecar.cache, sidecar.status, None)

    async def go() -> dict[str, object]:
        await sidecar.loop.cycle()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://sidecar") as client:
            assert (await client.get("/openapi.json")).status_code == 404  # not served
            doc: dict[str, object] = app.openapi()
        await sidecar.client.aclose()
        return doc

    doc = asyncio.run(go())
    sidecar.close()
    assert agents and set(agents) == {f"helios-exporter/{VERSION}"}
    assert doc["info"] == {"title": "helios-exporter", "version": VERSION}


def test_the_phase_client_sends_the_version() -> None:
    agents: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        agents.append(request.headers["user-agent"])
        return httpx.Response(200, json={"phases": []})

    args = argparse.Namespace(sidecar="http://sidecar.invalid", user=None, password_file=None,
                              insecure=False, ca_file=None)
    client = connect(args, transport=httpx.MockTransport(handler))
    try:
        client.phases()
    finally:
        client.close()
    assert agents == [f"helios-exporter/{VERSION}"]
