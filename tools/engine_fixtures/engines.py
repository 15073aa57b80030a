"""The pinned engine versions: where each renderer and fixture lives."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.engine_fixtures import wheels

FIXTURES = wheels.ROOT / "tests" / "fixtures" / "engines"


@dataclass(frozen=True)
class Engine:
    name: str
    wheel: wheels.Wheel
    renderer: str
    exact: bool = True  # re-rendering gives the same values (no timings measured)

    @property
    def folder(self) -> Path:
        return FIXTURES / f"{self.name}-{self.wheel.version}"


ENGINES = {
    "sglang": Engine("sglang", wheels.SGLANG, "tools.engine_fixtures.render_sglang"),
    "vllm": Engine("vllm", wheels.VLLM, "tools.engine_fixtures.render_vllm"),
    "lmcache": Engine("lmcache", wheels.LMCACHE, "tools.engine_fixtures.render_lmcache",
                      exact=False),
}
