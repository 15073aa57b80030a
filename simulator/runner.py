"""Choosing a scenario by name, and driving it: with wall time in the app, by hand in tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from simulator.clock import Clock, ManualClock, wall_clock
from simulator.engine import SimulatedEngine
from simulator.outage import OutageOptions, OutageScenario
from simulator.scenarios import (
    IdleScenario,
    InertScenario,
    LateReuseScenario,
    ReverseReplayScenario,
    Scenario,
    SteadyScenario,
)

SCENARIOS = ("steady", "reverse-replay", "outage", "idle", "demo", "inert", "late-reuse")
DEFAULT_RATES = {"steady": 3.0, "reverse-replay": 4.0, "outage": 3.0, "demo": 4.0, "inert": 3.0,
                 "late-reuse": 3.0}
# Engine settings a scenario needs unless the command line says otherwise. reverse-replay and idle
# (where the probe drives the corpora) store a checkpoint every 4 blocks (12 per 48-block prompt):
# 52 prompts want 624 rows of the 512 that a quarter of 32 GiB holds, while their 2496 pages leave
# the 24576-page slab ~90% free.
ENGINE_DEFAULTS: dict[str, dict[str, Any]] = {
    "steady": {},
    "reverse-replay": {"stores_per_request": 12},
    "outage": {},
    "idle": {"stores_per_request": 12},
    "demo": {"stores_per_request": 12},
    # One checkpoint per prompt, at its end: none lands inside the document the prompts share.
    "inert": {"stores_per_request": 1},
    "late-reuse": {},
}
# The scenarios with an outage timeline, and its defaults. The demo's: three replay passes (prime,
# forward, reverse: the cache-order probe's two outcomes; 13 s each and DEMO_PASS_GAP of quiet
# after each, so each pass is one clean step of the counters), the drain in the quiet after the
# third, restored 15 s later.
OUTAGE_DEFAULTS: dict[str, OutageOptions] = {
    "outage": OutageOptions(),
    "demo": OutageOptions(outage_after=44.0, drain_seconds=3.0, closed_seconds=2.0,
                          down_seconds=10.0),
}
DEMO_PASS_GAP = 2.0
DEMO_CYCLE = ("forward", "reverse")
# The longest a runner sleeps, so requests and host stores complete close to their due time.
MAX_STEP_S = 0.25

log = structlog.get_logger("simulator.runner")


def build_scenario(
    name: str, *, seed: int = 0, rate: float | None = None, outage: OutageOptions | None = None
) -> Scenario:
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose one of {', '.join(SCENARIOS)}")
    if name == "idle":
        if rate is not None:
            raise ValueError("the idle scenario sends no background traffic: --rate does not apply")
        return IdleScenario()
    rate = DEFAULT_RATES[name] if rate is None else rate
    if name == "steady":
        return SteadyScenario(rate=rate, seed=seed)
    if name == "reverse-replay":
        return ReverseReplayScenario(rate=rate)
    if name == "inert":
        return InertScenario(rate=rate, seed=seed)
    if name == "late-reuse":
        return LateReuseScenario(rate=rate, seed=seed)
    options = outage or OUTAGE_DEFAULTS[name]
    if name == "demo":
        replay = ReverseReplayScenario(rate=rate, pass_gap=DEMO_PASS_GAP, cycle=DEMO_CYCLE)
        return OutageScenario(options=options, rate=rate, seed=seed, name=name, traffic=replay)
    return OutageScenario(options=options, rate=rate, seed=seed)


def tick(engine: SimulatedEngine, scenario: Scenario, now: float) -> float:
    """Complete what is due, run the scenario once; seconds until the next tick."""
    engine.poll()
    return min(max(scenario.step(engine, now), 0.001), MAX_STEP_S)


def drive(
    engine: SimulatedEngine, scenario: Scenario, clock: ManualClock, seconds: float
) -> None:
    """Run ``scenario`` for ``seconds`` of simulated time without sleeping."""
    end = clock() + seconds
    while clock() < end:
        clock.advance(min(tick(engine, scenario, clock()), end - clock()))
    engine.poll()


class ScenarioRunner:
    """Runs a scenario against the engine in the background (started by the app's lifespan)."""

    def __init__(
        self,
        engine: SimulatedEngine,
        scenario: Scenario,
        *,
        clock: Clock = wall_clock,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.engine = engine
        self.scenario = scenario
        self.clock = clock
        self.sleep = sleep

    async def run(self) -> None:
        log.info("scenario_started", scenario=self.scenario.name)
        while True:
            try:
                delay = tick(self.engine, self.scenario, self.clock())
            except Exception:  # keep serving: a scenario bug must not take the engine down
                log.exception("scenario_step_failed", scenario=self.scenario.name)
                delay = MAX_STEP_S
            await self.sleep(delay)
