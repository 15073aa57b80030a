"""Calibration of observer-cost's interval: many A/A runs in process, at zero true cost, resolve
a difference no more often than the interval's nominal rate (5 % at 95 %), and runs with a known
cost cover it about as often as the level says.

Each run is what the command does, without HTTP: the simulated engine (simulator.engine, a
manual clock, seeded) serves the fixture-1024 corpus at C1 and C4 in the order the plan draws
(plan.py.plan: pairs of one off and one on repetition), its trace switched off and on
as the --off/--on commands would, each request sent by one of C closed-loop clients the moment
the previous one answered. A repetition's engine mean is the latency the engine recorded; its
client mean adds what a shared machine adds: a load factor that drifts over the run (an
Ornstein-Uhlenbeck process on its log, correlated over about two repetitions). The result is
doc.py's `result`, the command's own code. The same pairs judged with the normal
quantile in place of t (an interval that takes three pairs' spread as known, as a bootstrap
does) resolve far more often than 5 %: the bound is one an interval too narrow fails.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Sequence
from typing import Any

import pytest

from lab.observer_cost.doc import result
from lab.observer_cost.plan import plan
from simulator.clock import ManualClock
from simulator.corpora import lane
from simulator.engine import EngineConfig, SimulatedEngine

RUNS = 300
REQUESTS = 16  # a repetition: the corpus once, as the e2e tests send it
SCALE = 200.0  # the e2e tests' time scale: a request takes 3.2 ms of the clock
DRIFT_SD = 0.10  # the load factor's spread (log), stationary
DRIFT_TAU = 2.0  # its correlation time, in repetitions
FIXTURE = lane("fixture-1024")
PROMPTS = [tuple(FIXTURE.prompt(i)) for i in range(FIXTURE.bodies)]


class Load:
    """The machine's load factor on the client's clock: exp of an OU process in time."""

    def __init__(self, rng: random.Random, tau: float) -> None:
        self.rng, self.tau, self.x, self.t = rng, tau, rng.gauss(0, DRIFT_SD), 0.0

    def at(self, t: float) -> float:
        if t > self.t:
            keep = math.exp(-(t - self.t) / self.tau)
            self.x = self.x * keep + self.rng.gauss(0, DRIFT_SD * math.sqrt(1 - keep * keep))
            self.t = t
        return math.exp(self.x)


def repetition(engine: SimulatedEngine, clock: ManualClock, load: Load,
               concurrency: int) -> tuple[float, float]:
    """One repetition of REQUESTS at `concurrency`: (engine mean, client mean) in model seconds."""
    engine_s, client_s = [], []
    running: list[tuple[float, int, Any, float]] = []
    sent = 0

    def send() -> None:
        nonlocal sent
        r = engine.submit(PROMPTS[sent % len(PROMPTS)], FIXTURE.max_tokens)
        heapq.heappush(running, (r.finish_at, sent, r, clock.now))
        sent += 1

    while sent < min(concurrency, REQUESTS):
        send()
    while running:
        finish, _, r, started = heapq.heappop(running)
        clock.advance(max(0.0, finish - clock.now))
        engine.poll()
        engine.finish(r)
        engine_s.append(r.latency_s)
        client_s.append((clock.now - started) * SCALE * load.at(clock.now))
        if sent < REQUESTS:
            send()
    return statistics.fmean(engine_s), statistics.fmean(client_s)


def aa_run(seed: int, cost: float) -> list[dict[str, Any]]:
    """One observer-cost run in process: its steps as `result` reads them."""
    clock = ManualClock()
    engine = SimulatedEngine(EngineConfig(time_scale=SCALE, trace_cost=cost), clock=clock,
                             seed=seed)
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    load = Load(rng, 1.0)
    for step in plan("aa", [1, 4], 3, seed):
        if step.warmup:  # a repetition lasts REQUESTS / C requests of 0.65 s / SCALE
            load = Load(rng, DRIFT_TAU * REQUESTS / step.concurrency * 0.65 / SCALE)
        engine.trace_enabled = step.arm == "on"  # what --on / --off do
        engine_mean, client_mean = repetition(engine, clock, load, step.concurrency)
        steps.append({"phase": step.phase, "concurrency": step.concurrency, "arm": step.arm,
                      "number": step.number, "switch": {"error": None}, "valid": True,
                      "checks": [],
                      "figures": {"engine": {"mean": engine_mean},
                                  "client": {"mean": client_mean},
                                  "throughput": {"requests_per_second": 1 / client_mean}}})
    return steps


def narrow_resolves(steps: Sequence[dict[str, Any]], c: int, src: str) -> bool:
    """The paired interval with the normal quantile (1.96) in place of t at n - 1 degrees of
    freedom: what taking the spread of three pairs as known gives."""
    reps = {(s["arm"], s["number"]): s["figures"][src]["mean"] for s in steps
            if s["concurrency"] == c and s["arm"]}
    logs = [math.log(reps["on", n] / reps["off", n]) for n in (1, 2, 3)]
    return abs(statistics.fmean(logs)) > 1.96 * statistics.stdev(logs) / math.sqrt(len(logs))


def binomial_upper(n: int, p: float, tail: float = 0.001) -> int:
    """The smallest k with P(X > k) <= tail for X ~ Binomial(n, p): the slack a correct rate
    leaves over n runs."""
    total = 0.0
    for k in range(n + 1):
        total += math.comb(n, k) * p ** k * (1 - p) ** (n - k)
        if 1 - total <= tail:
            return k
    return n


@pytest.fixture(scope="module")
def aa_runs() -> list[list[dict[str, Any]]]:
    return [aa_run(seed, 0.0) for seed in range(RUNS)]


def test_at_zero_cost_a_difference_is_resolved_at_most_at_the_nominal_rate(
        aa_runs: list[list[dict[str, Any]]]) -> None:
    limit = binomial_upper(RUNS, 0.05)  # 5 % and the slack of 300 runs: 28 of 300
    resolved = {(c, src): 0 for c in (1, 4) for src in ("engine", "client")}
    narrow = dict.fromkeys(resolved, 0)
    for steps in aa_runs:
        for c in (1, 4):
            for src in ("engine", "client"):
                r = result(c, steps, src)
                assert r["verdict"] in ("not_resolved", "cost_resolved", "faster_resolved")
                resolved[c, src] += r["resolved"]
                narrow[c, src] += narrow_resolves(steps, c, src)
    assert all(n <= limit for n in resolved.values()), (resolved, limit)
    # The bound has teeth: an interval that ignores how little three pairs say fails it.
    assert all(n > limit for n in narrow.values()), (narrow, limit)


def test_a_known_cost_is_covered_about_as_often_as_the_level_says() -> None:
    runs, cost = 200, 0.0498  # a warm request: 0.64 s of its 0.643 s is decode
    covered = resolved = 0
    for seed in range(runs):
        steps = aa_run(10_000 + seed, 0.05)
        for c in (1, 4):
            r = result(c, steps, "engine")
            covered += r["low"] <= cost <= r["high"]
            resolved += r["verdict"] == "cost_resolved"
    misses = 2 * runs - covered
    assert misses <= binomial_upper(2 * runs, 0.05), misses
    assert resolved >= 0.9 * 2 * runs  # an interval that never resolves would pass the A/A test
