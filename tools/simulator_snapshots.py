"""Schema v3 snapshots captured from the simulator, as fixtures for the sidecar's goldens.

    scripts/generate simulator-snapshots     # rewrite them; --check says when they drifted

Each is a pure function of the simulator (a `ManualClock`, a fixed seed), so the files change
only when the simulator's model does:

- `simulator_tour_v3.json`: the steady scenario on a small tier (384 MiB, three quarters to rows:
  18 rows, 96 pages) at 30 requests/s for 30 s, then one request whose stores fail (the
  `store_fail` fault): every v3 field non-zero, both pressures, ancestor compactions, drops.
- `simulator_inert_v3.json`: the inert scenario for 120 s: lookups flow, every miss but the
  first is `too_short` or `no_checkpoint`, nothing hits.
"""

from __future__ import annotations

import json
from typing import Any

import structlog

from simulator.clock import ManualClock
from simulator.config import EngineConfig
from simulator.engine import SimulatedEngine
from simulator.runner import ENGINE_DEFAULTS, build_scenario, drive
from simulator.scenarios import make_prompt
from simulator.slabs import MIB, SlabGeometry

FOLDER = "tests/fixtures/snapshots"
SEED = 1


def tour() -> dict[str, Any]:
    clock = ManualClock()
    geometry = SlabGeometry(budget_bytes=384 * MIB, row_fraction=0.75)
    engine = SimulatedEngine(EngineConfig(geometry=geometry, snapshot_version=3),
                             clock=clock, seed=SEED)
    drive(engine, build_scenario("steady", seed=SEED, rate=30.0), clock, 30.0)
    rng = engine.rng
    engine.submit(make_prompt(rng, 1000), 16, fail_stores=True)
    clock.advance(1.0)
    engine.poll()
    return engine.snapshot()


def inert() -> dict[str, Any]:
    clock = ManualClock()
    engine = SimulatedEngine(EngineConfig(snapshot_version=3, **ENGINE_DEFAULTS["inert"]),
                             clock=clock, seed=SEED)
    drive(engine, build_scenario("inert", seed=SEED), clock, 120.0)
    return engine.snapshot()


def outputs() -> dict[str, str]:
    """{path under the repository root: file text}."""
    with structlog.testing.capture_logs():  # the engine's start events are not the output
        snaps = {"simulator_tour_v3.json": tour(), "simulator_inert_v3.json": inert()}
    return {f"{FOLDER}/{name}": json.dumps(snap, indent=2) + "\n" for name, snap in snaps.items()}
