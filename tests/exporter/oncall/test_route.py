"""`GET /` on the assembled sidecar: the page of the published view, with its headers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from exporter.app import build_app
from exporter.oncall import html
from tests.helpers import StubEngine, make_sidecar


def test_root_serves_the_page_of_the_published_view(tmp_path: Path) -> None:
    async def run() -> None:
        engine = StubEngine()
        sidecar = make_sidecar(engine, tmp_path)
        app = build_app(sidecar.loop, sidecar.cache, sidecar.status, None, page=sidecar.page)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://sidecar") as client:
            before = await client.get("/")
            assert before.status_code == 200
            assert "unknown" in before.text  # nothing polled yet: said so, no error
            await sidecar.loop.cycle()
            page = await client.get("/")
            assert page.headers["content-type"] == "text/html; charset=utf-8"
            for name, value in html.HEADERS.items():
                assert page.headers[name] == value
            status = (await client.get("/status")).json()
            assert status["identity"]["container_id"] == "4be1c0ffee12"
            assert status["generation"] in page.text
            assert status["identity"]["container_id"] in page.text
            assert engine.requests.count("/debug/offload/snapshot") == 1  # the page polls nothing
        await sidecar.client.aclose()
        sidecar.loop.close()

    asyncio.run(run())


def test_no_page_without_a_renderer(tmp_path: Path) -> None:
    async def run() -> None:
        sidecar = make_sidecar(StubEngine(), tmp_path)
        app = build_app(sidecar.loop, sidecar.cache, sidecar.status, None)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://sidecar") as client:
            assert (await client.get("/")).status_code == 404
        await sidecar.client.aclose()
        sidecar.loop.close()

    asyncio.run(run())
