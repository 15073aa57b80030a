"""A sidecar (the real app) whose engine is the simulator's real app, both in process.

The sidecar's engine client talks to the simulator through httpx.ASGITransport; the simulator
runs on a ManualClock whose sleep advances it, so requests take no wall time. No poll loop runs
in the background: cycles happen only where a test (or a phase edge) runs one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from exporter.app import build_app as sidecar_app
from exporter.config import Config
from exporter.sidecar import Sidecar, build
from simulator.app import build_app as engine_app
from tests.simulator.harness import corpus, idle_engine

TOKEN = "phase-Token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class PhaseEnv:
    def __init__(self, state_dir: Path, token: str | None = TOKEN, seed: int = 3,
                 clock: Callable[[], float] = time.time, **engine_config: Any) -> None:
        self.engine, self.clock = idle_engine(seed, **engine_config)

        async def sleep(seconds: float) -> None:
            self.clock.advance(seconds)

        self.engine_app = engine_app(self.engine, sleep=sleep)
        extra: dict[str, Any] = {}
        if token is not None:
            token_file = state_dir.parent / "phases-token"
            token_file.write_text(token + "\n")
            extra["events_token_file"] = token_file
        self.state_dir = state_dir
        self.sidecar: Sidecar = build(
            # The engine is in process and takes no wall time of its own: a busy machine (the
            # suite beside busy loops) is all that can hold it past the default 2 s.
            Config(engine_url="http://engine", state_dir=state_dir, no_nvml=True,
                   poll_interval=3600.0, timeout=60.0, **extra),
            transport=httpx.ASGITransport(app=self.engine_app), clock=clock)
        self.sidecar.loop.load_state()
        self.sidecar.phases.load()
        self.app = sidecar_app(self.sidecar.loop, self.sidecar.cache, self.sidecar.status,
                               self.sidecar.events_token, self.sidecar.phases)

    # -- sync wrappers (each runs its own event loop) -------------------------------------------
    def run(self, coro: Any) -> Any:
        return asyncio.run(coro)

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            return await client.request(method, path, **kwargs)

    def post(self, body: Any = None, headers: dict[str, str] | None = None,
             content: bytes | None = None, path: str = "/experiment/phases") -> httpx.Response:
        kwargs: dict[str, Any] = {"headers": AUTH if headers is None else headers}
        if content is not None:
            kwargs["content"] = content
        else:
            kwargs["json"] = body
        resp: httpx.Response = self.run(self._request("POST", path, **kwargs))
        return resp

    def phase(self, action: str, name: str, note: str | None = None) -> httpx.Response:
        return self.post({"name": name, "action": action, "note": note})

    def phases(self) -> list[dict[str, Any]]:
        resp = self.run(self._request("GET", "/experiment/phases", headers=AUTH))
        assert resp.status_code == 200, resp.text
        out: list[dict[str, Any]] = resp.json()["phases"]
        return out

    def metrics(self) -> str:
        text: str = self.run(self._request("GET", "/metrics")).text
        return text

    def cycle(self) -> None:
        self.run(self.sidecar.loop.cycle())

    def send(self, bodies: Sequence[bytes]) -> None:
        """Completions straight to the engine, one at a time (the sidecar does not see them)."""
        async def go() -> None:
            transport = httpx.ASGITransport(app=self.engine_app)
            async with httpx.AsyncClient(transport=transport, base_url="http://engine") as c:
                for body in bodies:
                    r = await c.post("/v1/completions", content=body,
                                     headers={"content-type": "application/json"})
                    assert r.status_code == 200, r.text
        self.run(go())

    def close(self) -> None:
        self.sidecar.close()
        self.run(self.sidecar.client.aclose())


def bodies(name: str = "small-12", model: str | None = None) -> tuple[bytes, ...]:
    return corpus(name, model)
