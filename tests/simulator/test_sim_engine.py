from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from simulator.clock import ManualClock
from simulator.engine import (
    GENERATION_RE,
    EngineConfig,
    EngineUnavailable,
    SimulatedEngine,
)
from simulator.metrics import MAX_REQUEST_SERIES

SCHEMA = Path(__file__).resolve().parents[2] / "exporter" / "schema" / "snapshot-v1.schema.json"

_TYPES: dict[str, type] = {"integer": int, "number": float, "string": str, "boolean": bool,
                          "array": list, "object": dict}


def schema_shape(node: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The shape every snapshot field of the schema has: an object's properties one by one, a
    free mapping (misses keys are free text) as a dict, a value as its Python type."""
    if "$ref" in node:
        return schema_shape(defs[node["$ref"].split("/")[-1]], defs)
    if "properties" in node:
        return {key: schema_shape(sub, defs) for key, sub in node["properties"].items()}
    if "const" in node or "enum" in node:
        return type(node["const"] if "const" in node else node["enum"][0])
    kind = node["type"]
    return _TYPES[next(k for k in kind if k != "null") if isinstance(kind, list) else kind]


_V1 = json.loads(SCHEMA.read_text())
# docs/interface.md section 1: every field of the schema (the simulator models each one) ...
CONTRACT_SHAPE: dict[str, Any] = {
    **schema_shape(_V1, _V1["$defs"]),
    # ... and beyond the contract (unknown fields, which the sidecar ignores): observer-cost's
    # clock anchors and what the simulator knows of its own trace switch.
    "clock": {"unix_seconds": float, "monotonic_seconds": float},
    "simulator": {"trace": {"enabled": bool, "cost": float}},
}
# (v3) identity.engine: the simulator says what it is, so evidence of it says SIMULATED
CONTRACT_SHAPE["identity"] = {**CONTRACT_SHAPE["identity"], "engine": str}


def assert_shape(value: Any, shape: Any, where: str = "snapshot") -> None:
    if isinstance(shape, dict):
        assert isinstance(value, dict), where
        assert set(value) == set(shape), f"{where}: {sorted(value)} != {sorted(shape)}"
        for key, sub in shape.items():
            assert_shape(value[key], sub, f"{where}.{key}")
    elif shape is bool:
        assert isinstance(value, bool), f"{where}: {value!r}"
    else:
        assert isinstance(value, shape) and not isinstance(value, bool), f"{where}: {value!r}"


def make_engine(seed: int = 7, **config: Any) -> tuple[SimulatedEngine, ManualClock]:
    clock = ManualClock()
    return SimulatedEngine(EngineConfig(**config), clock=clock, seed=seed), clock


def numbers(node: Any) -> set[float]:
    """Every number in a snapshot section (its nested objects' too)."""
    if isinstance(node, dict):
        return set().union(*(numbers(v) for v in node.values()))
    return {node} if isinstance(node, int | float) and not isinstance(node, bool) else set()


def body(n: int, start: int = 1000) -> list[int]:
    return list(range(start, start + n))


def test_snapshot_has_the_contract_shape_and_validates() -> None:
    engine, clock = make_engine(snapshot_version=1)  # schema 3's shape: tests/simulator/test_sim_v3.py
    engine.submit(body(700), 16)
    clock.advance(5)
    engine.poll()
    snap = engine.snapshot()
    assert_shape(snap, CONTRACT_SHAPE)
    assert snap["schema_version"] == 1
    assert snap["ranks"] == [
        {"rank": 0, "gpu_uuid": engine.ranks[0]["gpu_uuid"]},
        {"rank": 1, "gpu_uuid": engine.ranks[1]["gpu_uuid"]},
    ]
    assert all(re.fullmatch(r"GPU-[0-9a-f-]{36}", str(r["gpu_uuid"])) for r in snap["ranks"])
    assert re.fullmatch(r"[0-9a-f]{12}", snap["identity"]["container_id"])
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", snap["identity"]["image_digest"])
    assert snap["offload"]["slabs"]["row"]["capacity"] == 512
    assert snap["offload"]["slabs"]["page"]["capacity"] == 24576
    assert snap["offload"]["budget_bytes"] == 34359738368
    json.dumps(snap)  # plain JSON
    if SCHEMA.exists():
        jsonschema.validate(snap, json.loads(SCHEMA.read_text()))


def test_generation_format_and_fresh_value_every_incarnation() -> None:
    engine, _ = make_engine()
    seen = {engine.generation}
    assert re.fullmatch(r"g-\d{8}T\d{4}Z-[0-9a-f]{4}", engine.generation)
    assert engine.generation.startswith("g-20251129T0412Z-")  # ManualClock's default start
    for _ in range(50):  # same minute every time: the hex part must still differ
        previous = engine.generation
        engine.restart()
        assert GENERATION_RE.fullmatch(engine.generation)
        assert engine.generation != previous
        seen.add(engine.generation)
    assert len(seen) > 40


def test_restart_starts_fresh_counters_and_an_empty_cache() -> None:
    engine, clock = make_engine()
    prompt = body(900)
    engine.submit(prompt, 8)
    clock.advance(2)
    engine.poll()
    before = engine.snapshot()
    assert before["offload"]["host"]["stores"] == 3
    assert before["offload"]["lookups"]["total"] == 1
    old_generation, container = engine.generation, engine.container_id
    clock.advance(60)
    engine.restart()
    after = engine.snapshot()
    assert after["generation"] != old_generation
    assert after["started_at"] == clock()
    assert after["identity"]["container_id"] == container
    assert numbers(after["offload"]["host"]) == {0}
    assert after["offload"]["lookups"] == {"total": 0, "hits": 0, "misses": {},
                                           "blocked_tokens": {}, "evicted_by": dict.fromkeys(
                                               ("row", "page", "ancestor_compaction"), 0)}
    assert numbers(after["offload"]["prompt_tokens"]) == {0}
    assert after["offload"]["slabs"]["row"]["free"] == 512
    assert after["offload"]["resident"] == {"records": 0, "bytes": 0}
    # Host memory was lost: the prompt misses.
    engine.submit(prompt, 8)
    assert engine.snapshot()["offload"]["lookups"]["misses"] == {"no_prefix": 1}
    assert b'helios:prompt_tokens_total{model_name="qwen3-next"} 0.0' in engine.metrics.render()


def test_restart_variations() -> None:
    engine, _ = make_engine()
    old_generation, container, image = engine.generation, engine.container_id, engine.image_digest
    engine.restart("same", generation=old_generation)
    assert engine.generation == old_generation
    assert engine.container_id == container and engine.image_digest == image
    engine.restart("new", image_digest="sha256:" + "ab" * 32)
    assert engine.container_id != container
    assert engine.image_digest == "sha256:" + "ab" * 32
    assert engine.generation != old_generation
    with pytest.raises(ValueError):
        engine.restart(generation="bad generation!")
    with pytest.raises(ValueError):
        engine.restart(container="other")  # type: ignore[arg-type]


def test_restart_in_a_named_container_redoes_a_restore_into_the_retained_one() -> None:
    engine, _ = make_engine()
    retained = engine.container_id
    engine.restart("new")
    assert engine.container_id != retained
    engine.restart(container_id=retained)
    assert engine.container_id == retained
    with pytest.raises(ValueError, match="not with container 'new'"):
        engine.restart("new", container_id=retained)
    with pytest.raises(ValueError, match="does not match"):
        engine.restart(container_id="not-a-container")
    assert engine.container_id == retained


def test_repeated_prompt_restores_from_host() -> None:
    engine, clock = make_engine()
    prompt = body(64 * 10 + 5)
    first = engine.submit(prompt, 4)
    assert first.restored_tokens == 0
    clock.advance(5)
    engine.poll()
    second = engine.submit(prompt, 4)
    host = engine.snapshot()["offload"]["host"]
    # Checkpoints at blocks 3, 7 and 10: the deepest covers 640 tokens; the GPU-resident copy
    # of the first prompt already covered all but its last token.
    assert engine.checkpoint_depths(len(prompt)) == [3, 7, 10]
    assert second.reused_tokens == len(prompt) - 1
    assert host["stores"] == 3
    assert host["prompt_tokens_reused"] == second.reused_tokens
    assert engine.snapshot()["offload"]["lookups"]["hits"] == 1


def test_host_restore_counts_tokens_beyond_the_device_cache() -> None:
    engine, clock = make_engine(device_cache_slots=1)
    prompt = body(64 * 10 + 5)
    engine.submit(prompt, 4)
    clock.advance(5)
    engine.poll()
    engine.submit(body(300, start=50_000), 4)  # pushes the prompt out of the GPU cache
    clock.advance(5)
    engine.poll()
    again = engine.submit(prompt, 4)
    assert again.restored_tokens == 640 and again.reused_tokens == 640
    assert engine.snapshot()["offload"]["host"]["tokens_restored"] == 640


def test_hit_node_is_pinned_while_the_request_runs() -> None:
    engine, clock = make_engine()
    prompt = body(64 * 4 + 1)
    engine.submit(prompt, 4)
    clock.advance(5)
    engine.poll()
    request = engine.submit(prompt, 100)
    assert request.hit_node is not None
    assert engine.index.node(request.hit_node).pins == 1
    clock.advance(5)
    engine.poll()
    assert request.finished
    assert engine.index.node(request.hit_node).pins == 0


def test_stores_complete_asynchronously() -> None:
    engine, clock = make_engine()
    engine.submit(body(64 * 6 + 1), 4)
    nodes = [n for n in engine.index.nodes() if n.row is not None]
    assert len(nodes) == 3 and not any(n.durable for n in nodes)
    assert engine.snapshot()["offload"]["host"]["stores"] == 0
    clock.advance(0.031)
    engine.poll()
    assert all(n.durable and n.pins == 0 for n in nodes)
    assert engine.snapshot()["offload"]["host"]["stores"] == 3


def test_admission_drain_lets_inflight_reach_zero() -> None:
    engine, clock = make_engine()
    for i in range(3):
        engine.submit(body(500, start=i * 1000), 50)
    assert engine.snapshot()["admission"] == {"state": "open", "inflight_requests": 3}
    engine.set_admission("draining")
    with pytest.raises(EngineUnavailable):
        engine.submit(body(500), 5)
    clock.advance(0.1)
    engine.poll()
    assert engine.inflight == 3
    clock.advance(1.0)
    engine.poll()
    assert engine.snapshot()["admission"] == {"state": "draining", "inflight_requests": 0}
    engine.set_admission("closed")
    assert engine.snapshot()["admission"]["state"] == "closed"
    with pytest.raises(ValueError):
        engine.set_admission("ajar")  # type: ignore[arg-type]


def test_inflight_override_and_crash() -> None:
    engine, _ = make_engine()
    engine.inflight_override = 4
    assert engine.snapshot()["admission"]["inflight_requests"] == 4
    engine.inflight_override = None
    assert engine.snapshot()["admission"]["inflight_requests"] == 0
    engine.submit(body(200), 5)
    engine.crash()
    assert engine.crashed and engine.running == 0
    with pytest.raises(EngineUnavailable):
        engine.submit(body(200), 5)
    engine.restart()
    assert not engine.crashed and engine.admission == "open"
    engine.submit(body(200), 5)


def test_same_seed_same_run() -> None:
    snaps = []
    for _ in range(2):
        engine, clock = make_engine(seed=3)
        for i in range(5):
            engine.submit(body(400 + i * 100, start=i), 8)
            clock.advance(0.5)
            engine.poll()
        snaps.append(engine.snapshot())
    assert snaps[0] == snaps[1]


def test_key_mismatch_between_models() -> None:
    engine, clock = make_engine()
    prompt = body(64 * 3 + 1)
    engine.submit(prompt, 4)
    clock.advance(5)
    engine.poll()
    engine.submit(prompt, 4, model="other-adapter")
    key = engine.key_for(None)
    assert engine.snapshot()["offload"]["lookups"]["misses"] == {
        "no_prefix": 1, f"key_mismatch:ckpt={key[:4]}": 1,
    }


def test_request_id_series_stay_bounded() -> None:
    engine, clock = make_engine()
    for i in range(MAX_REQUEST_SERIES + 20):
        engine.submit(body(100, start=i), 1)
        clock.advance(1)
        engine.poll()
    text = engine.metrics.render().decode()
    assert text.count("helios:requests_total{") == MAX_REQUEST_SERIES
    assert f'helios:prompt_tokens_total{{model_name="qwen3-next"}} {100.0 * 70}' in text
