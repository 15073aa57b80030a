"""A simulated engine serving schema v3 on a manual clock, and the schemas its snapshots are
checked against (tests/simulator/test_sim_v3.py, test_sim_v3_fields.py)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.slabs import MIB
from tests.conftest import ROOT
from tests.snapshot_v3 import violations

SCHEMAS = ROOT / "exporter" / "schema"
V1 = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "snapshot-v1.schema.json").read_text()))
V3 = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "snapshot-v3.schema.json").read_text()))
ROW, PAGE = 16 * MIB, 1 * MIB


def engine_v3(seed: int = 5, **config: Any) -> tuple[SimulatedEngine, ManualClock]:
    clock = ManualClock()
    return SimulatedEngine(EngineConfig(snapshot_version=3, **config), clock=clock, seed=seed), clock


def body(n: int, start: int) -> list[int]:
    return list(range(start, start + n))


def settle(engine: SimulatedEngine, clock: ManualClock, seconds: float = 5.0) -> None:
    """Let every store and request complete."""
    clock.advance(seconds)
    engine.poll()


def offload(engine: SimulatedEngine) -> dict[str, Any]:
    snap = engine.snapshot()
    assert violations(snap) == []
    off: dict[str, Any] = snap["offload"]
    return off
