"""The demo's offload narration, fed the real pipeline in-process: the simulated engine playing the
demo scenario on a manual clock, read by a real sidecar (`exporter.sidecar.build`) whose rendered
/metrics is what the narrator parses."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from exporter.config import Config
from exporter.sidecar import build
from lab.demo.offload import OffloadNarrator
from lab.demo.story import Stamp
from simulator.app import build_app
from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.runner import DEMO_CYCLE, ENGINE_DEFAULTS, build_scenario, drive
from simulator.scenarios import replay_order


def narrate(tmp_path: Path, polls: list[float], scenario: str = "demo",
            pass_size: int | None = 52) -> str:
    """Play `scenario` and poll the sidecar at each of `polls` (seconds from the start), feeding
    its exposition to the narrator; the narration."""
    clock = ManualClock()
    t0 = clock()
    engine = SimulatedEngine(EngineConfig(**ENGINE_DEFAULTS[scenario]), clock=clock, seed=1)
    traffic = build_scenario(scenario, seed=1)
    app = build_app(engine)  # no scenario: `drive` plays it on the manual clock
    # A generous timeout: on a loaded machine the in-process engine may answer slowly.
    config = Config(engine_url="http://engine", state_dir=tmp_path, no_nvml=True, timeout=60.0)
    sidecar = build(config, transport=httpx.ASGITransport(app=app), clock=clock)
    narrator = OffloadNarrator(Stamp(clock), pass_size=pass_size,
                               pass_name=lambda n: replay_order(n, DEMO_CYCLE))
    out: list[str] = []

    async def run() -> None:
        for at in polls:
            drive(engine, traffic, clock, t0 + at - clock())
            await sidecar.loop.cycle()
            out.extend(narrator.lines(sidecar.cache.render(False).decode()))
        await sidecar.client.aclose()

    try:
        asyncio.run(run())
    finally:
        sidecar.close()
    return "\n".join(out)


def test_each_pass_with_its_hits_and_row_pressure_while_pages_sit_free(tmp_path: Path) -> None:
    # A poll before the traffic and one in the quiet after each pass (13 s of requests, 2 s quiet).
    text = narrate(tmp_path, [0.0, 14.0, 29.0, 44.0])
    lines = text.splitlines()
    assert "512 rows of 16 MiB and 24576 pages of 1 MiB in a 32 GiB budget" in lines[0]
    assert "pass 1, prime: 0 of 52 lookups hit (misses: no_prefix 52)" in text
    assert "pass 2, forward: 0 of 52 lookups hit (misses: evicted 52)" in text
    assert "pass 3, reverse: 43 of 52 lookups hit (misses: evicted 9)" in text
    assert "row evictions 624 (624 while >= 25% of pages were free), page evictions 0" in text
    assert text.count("free now: rows 0/512 (0%), pages 22528/24576 (92%)") == 3
    assert "as far as the last poll saw" not in text
    # Schema 3 (the simulator's default): where the tokens came from, how the stores ended.
    v3 = [line for line in lines if "prompt tokens:" in line]
    assert len(v3) == 3
    assert "computed 100%, gpu prefix 0%, host restored 0%" in v3[0]
    assert "host stores: stored 624, dropped full 0, dropped ineligible 0, failed 0" in v3[0]
    assert "host restored 0%" not in v3[2]  # the reverse pass restores from the host


def test_a_pass_seen_only_past_its_end_says_so(tmp_path: Path) -> None:
    """Without the quiet between passes a poll lands inside the next pass: the report counts what
    the poll saw and says so, rather than claiming the pass."""
    text = narrate(tmp_path, [0.0, 10.0, 16.1])  # 41 lookups at 10 s; 52 + 5 at 16.1 s
    assert text.count("pass 1") == 1  # not at 10 s, mid-way through it
    assert "pass 1, prime (as far as the last poll saw): 0 of 57 lookups hit" in text


def test_without_passes_a_report_per_period_and_a_new_generation_is_announced(
        tmp_path: Path) -> None:
    text = narrate(tmp_path, [0.0, 10.0, 25.0, 60.0, 80.0], scenario="outage", pass_size=None)
    lines = text.splitlines()
    # outage: steady traffic, drained at 20 s, restored at 55 s into a new generation
    assert [line.split("]")[1].split()[0] for line in lines if "generation" in line] == [
        "offload", "offload"]
    generations = {line.split("generation ")[1].split(":")[0] for line in lines
                   if "generation" in line}
    assert len(generations) == 2
    assert "last 25s:" in text and " lookups hit" in text
