"""`demo --engine sglang|vllm`'s narration, fed the real pipeline in-process: the simulated
engine in that flavor playing late-reuse on a manual clock, read by a real sidecar of the
matching `--engine-kind` whose rendered /metrics the narrators parse."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from exporter.config import Config
from exporter.sidecar import build
from lab.demo import engines
from lab.demo.offload import OffloadNarrator
from lab.demo.story import Stamp
from simulator.app import build_app
from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.runner import build_scenario, drive

RULES = Path(__file__).resolve().parents[3] / "alerts" / "helios-alerts.yaml"


def narrate(tmp_path: Path, kind: str, polls: list[float]) -> str:
    clock = ManualClock()
    t0 = clock()
    engine = SimulatedEngine(EngineConfig(), clock=clock, seed=1)
    traffic = build_scenario("late-reuse", seed=1)
    app = build_app(engine, flavor=kind)
    config = Config(engine_url="http://engine", state_dir=tmp_path, no_nvml=True, timeout=60.0,
                    engine_kind=kind)
    sidecar = build(config, transport=httpx.ASGITransport(app=app), clock=clock)
    stamp = Stamp(clock)
    narrators = (OffloadNarrator(stamp, period=10.0), engines.EngineNarrator(stamp))
    out: list[str] = []

    async def run() -> None:
        for at in polls:
            drive(engine, traffic, clock, t0 + at - clock())
            await sidecar.loop.cycle()
            text = sidecar.cache.render(False).decode()
            for narrator in narrators:
                out.extend(narrator.lines(text))
        await sidecar.client.aclose()

    try:
        asyncio.run(run())
    finally:
        sidecar.close()
    return "\n".join(out)


def test_sglang_stores_without_reuse_then_reuses_and_nothing_absent_reads_zero(
        tmp_path: Path) -> None:
    text = narrate(tmp_path, "sglang", [2.0, 12.0, 24.0, 36.0, 48.0])
    lines = text.splitlines()
    stores = [i for i, line in enumerate(lines) if "has restored nothing" in line]
    reuse = [i for i, line in enumerate(lines) if "reuse from the host tier" in line]
    assert len(stores) == 1 and len(reuse) == 1 and stores[0] < reuse[0], text
    assert "[+ 36.0s]" in lines[reuse[0]] or "[+ 48.0s]" in lines[reuse[0]], text
    # SGLang exports no lookup hits, record sizes or evictions: said so, never 0.
    assert "hits not exported by this engine" in text and " lookups hit" not in text, text
    assert "evictions not exported by this engine" in text and "row evictions" not in text
    assert " B " not in text and "0 B" not in text, text


def test_vllm_without_restored_tokens_yet_does_not_claim_reuse(tmp_path: Path) -> None:
    text = narrate(tmp_path, "vllm", [2.0, 12.0])
    assert "reuse from the host tier" not in text, text


@pytest.mark.parametrize("kind", ["sglang", "vllm"])
def test_the_story_names_the_coverage_and_the_alerts_that_cannot_fire(kind: str) -> None:
    inert = dict(engines.inert_alerts(kind, RULES))
    assert "HeliosOffloadCacheInert" in inert and "lookup_misses" in inert[
        "HeliosOffloadCacheInert"]
    assert engines.NO_REUSE not in inert
    story = " ".join(engines.story(kind, RULES))
    assert f"--engine-kind {kind}" in story and f"{len(inert)} shipped alerts cannot fire" in story


def test_the_engine_decides_the_default_scenario_only() -> None:
    assert engines.scenario("helios", None) == "demo"
    assert engines.scenario("sglang", None) == engines.scenario("vllm", None) == "late-reuse"
    assert engines.scenario("sglang", "steady") == "steady"


def test_an_absent_restored_counter_is_not_read_as_no_reuse() -> None:
    narrator = engines.EngineNarrator(Stamp(lambda: 0.0))
    stores_only = "# TYPE helios_offload_host_stores_total counter\n" \
                  'helios_offload_host_stores_total{generation="g"} 5\n'
    assert narrator.lines(stores_only) == []


@pytest.mark.e2e
def test_the_demo_as_an_sglang_engine_end_to_end(tmp_path: Path) -> None:
    """`demo --engine sglang` as a process: the simulator in SGLang's shape, the sidecar of
    --engine-kind sglang; stores without reuse, then reuse from the host tier at about 30 s."""
    from tests.lab.demo.demo_proc import DemoRun
    from tools.harness import free_port

    run = DemoRun(tmp_path, "--engine", "sglang", "--no-prometheus", "--duration", "45",
                  "--engine-port", str(free_port()), "--port", str(free_port()))
    try:
        run.wait_for("scenario late-reuse")
        run.wait_for("has restored nothing", timeout=60)
        run.wait_for("reuse from the host tier", timeout=90)
        assert run.proc.wait(timeout=60) == 0, run.output()
    finally:
        run.stop()
    out = " ".join(run.output().split())  # the story's lines are wrapped
    assert "--engine-kind sglang" in out and "shipped alerts cannot fire" in out, out
    assert " lookups hit" not in out, out  # hits are absent on SGLang, never 0
