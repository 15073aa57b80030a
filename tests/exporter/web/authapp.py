"""The real app (ASGI) of an in-process sidecar with an events token and, optionally, a web
configuration, for the credential tests (test_auth.py, test_basic_auth_app.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx

from exporter.sidecar import web_app
from exporter.web.auth import AuthFailures
from tests.helpers import StubEngine, make_sidecar
from tools.pki import write_web_config

TOKEN = "events-Token-0123456789abcdef"
PASSWORD = "correct horse battery staple"


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
        self.app: Any = web_app(self.sidecar)  # as `serve` builds it

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


def logged(logs: list[dict[str, Any]]) -> str:
    return json.dumps(logs, default=str)
