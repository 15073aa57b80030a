"""`helios-exporter check`: one poll cycle, print the exposition, exit non-zero on a bad engine."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from exporter.config import Config
from exporter.sidecar import build


async def check(config: Config) -> int:
    # A throwaway state directory: `check` must never touch the sidecar's restore state.
    with tempfile.TemporaryDirectory(prefix="helios-check-") as tmp:
        sidecar = build(replace(config, state_dir=Path(tmp), no_nvml=True))
        try:
            await sidecar.loop.cycle()
        finally:
            await sidecar.client.aclose()
            sidecar.close()
        sys.stdout.write(sidecar.cache.render(False).decode())
        problems = [
            f"{name}: {health.last_reason}: {health.last_error}"
            for name, health in sidecar.loop.view.sources.items()
            if name.startswith("engine_") and health.up is False
        ]
    for line in problems:
        print(f"helios-exporter check: {line}", file=sys.stderr)
    return 1 if problems else 0
