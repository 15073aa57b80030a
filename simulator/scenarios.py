"""Traffic scenarios: what requests the simulated engine sees, and when.

A scenario is a step function of the engine and the time: it submits what is due and answers how
long until it wants to run again. It never sleeps, so tests drive it with a ``ManualClock``
(``simulator.runner.drive``) and the app drives it with wall time (``ScenarioRunner``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from simulator.corpora import TEMPLATE, VOCAB, lane
from simulator.engine import EngineUnavailable, SimulatedEngine

log = structlog.get_logger("simulator.scenarios")


class Scenario(Protocol):
    name: str
    traffic_enabled: bool

    def step(self, engine: SimulatedEngine, now: float) -> float:
        """Do what is due at ``now``; seconds until the next call is wanted."""
        ...

    def describe(self) -> dict[str, Any]: ...


def make_prompt(rng: random.Random, tokens: int) -> tuple[int, ...]:
    body = max(0, tokens - len(TEMPLATE))
    return TEMPLATE + tuple(rng.randrange(1000, VOCAB) for _ in range(body))


@dataclass
class TrafficStats:
    submitted: int = 0
    refused: int = 0

    def submit(
        self, engine: SimulatedEngine, prompt: tuple[int, ...], max_tokens: int,
        model: str | None = None,
    ) -> bool:
        try:
            engine.submit(prompt, max_tokens, model)
        except EngineUnavailable:
            self.refused += 1
            return False
        self.submitted += 1
        return True


@dataclass
class SteadyScenario:
    """A mix of repeated, branched, fresh, too-short and other-model prompts at ``rate`` req/s."""

    rate: float = 3.0
    seed: int = 0
    pool_size: int = 48
    alt_model: str = "qwen3-next-lora-support"
    name: str = "steady"
    traffic_enabled: bool = True
    traffic: TrafficStats = field(default_factory=TrafficStats)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate must be positive, got {self.rate}")
        self.rng = random.Random(self.seed)
        self.pool = [
            make_prompt(self.rng, self.rng.randint(300, 2600)) for _ in range(self.pool_size)
        ]
        # Popular prompts come back more often (Zipf-like weights).
        self.weights = [1.0 / (i + 1) for i in range(self.pool_size)]
        self.next_at: float | None = None

    def next_prompt(self) -> tuple[tuple[int, ...], str | None]:
        rng = self.rng
        roll = rng.random()
        popular = rng.choices(self.pool, self.weights)[0]
        if roll < 0.45:
            return popular, None
        if roll < 0.65:
            # Same document, a different question: shares a prefix, then branches.
            cut = rng.randint(len(popular) // 3, len(popular))
            return popular[:cut] + make_prompt(rng, rng.randint(64, 600))[len(TEMPLATE) :], None
        if roll < 0.90:
            return make_prompt(rng, rng.randint(200, 2600)), None
        if roll < 0.95:
            return make_prompt(rng, rng.randint(10, 60)), None
        return popular, self.alt_model

    def step(self, engine: SimulatedEngine, now: float) -> float:
        if self.next_at is None:
            self.next_at = now
        if now >= self.next_at:
            prompt, model = self.next_prompt()
            if self.traffic_enabled:
                self.traffic.submit(engine, prompt, self.rng.randint(16, 64), model)
            self.next_at = now + min(self.rng.expovariate(self.rate), 5.0 / self.rate)
        return self.next_at - now

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "rate": self.rate, "traffic_enabled": self.traffic_enabled,
                "submitted": self.traffic.submitted, "refused": self.traffic.refused}


def replay_order(pass_number: int, cycle: tuple[str, ...] = ("reverse", "forward")) -> str:
    """The order of pass ``pass_number`` (0-based) of a replay: the prime (forward), then the
    orders of ``cycle`` in turn."""
    if pass_number == 0:
        return "prime"
    return cycle[(pass_number - 1) % len(cycle)]


@dataclass
class ReverseReplayScenario:
    """The cache-order probe as background traffic: prime the bodies of ``corpus`` (the
    bodies ``python -m simulator corpus`` writes) in forward order, replay them in reverse, and
    repeat (forward again, reverse again ...) at a constant ``rate``. The demo scenario replays
    forward first (``cycle``), and keeps ``pass_gap`` seconds of quiet after each pass so that
    every pass is a clean step in the counters."""

    rate: float = 4.0
    corpus: str = "probe-52"
    pass_gap: float = 0.0
    cycle: tuple[str, ...] = ("reverse", "forward")
    name: str = "reverse-replay"
    traffic_enabled: bool = True
    traffic: TrafficStats = field(default_factory=TrafficStats)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate must be positive, got {self.rate}")
        if self.pass_gap < 0:
            raise ValueError(f"pass_gap must not be negative, got {self.pass_gap}")
        if not self.cycle or set(self.cycle) - {"forward", "reverse"}:
            raise ValueError(f"cycle must list forward and reverse passes, got {self.cycle}")
        bodies = lane(self.corpus)
        self.bodies = [tuple(bodies.prompt(i)) for i in range(bodies.bodies)]
        self.prompts = len(self.bodies)
        self.max_tokens = bodies.max_tokens
        self.position = 0
        self.next_at: float | None = None

    @property
    def pass_number(self) -> int:
        return self.position // self.prompts

    @property
    def phase(self) -> str:
        return replay_order(self.pass_number, self.cycle)

    def start_over(self) -> None:
        """Prime again from the first body (a restored engine starts with an empty tier)."""
        self.position = 0
        self.next_at = None

    def current_index(self) -> int:
        i = self.position % self.prompts
        return self.prompts - 1 - i if self.phase == "reverse" else i

    def step(self, engine: SimulatedEngine, now: float) -> float:
        if self.next_at is None:
            self.next_at = now
        if now >= self.next_at:
            gap = 0.0
            if self.traffic_enabled and self.traffic.submit(
                engine, self.bodies[self.current_index()], self.max_tokens
            ):
                self.position += 1
                if self.position % self.prompts == 0:
                    gap = self.pass_gap
            self.next_at = now + 1.0 / self.rate + gap
        return self.next_at - now

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "rate": self.rate, "phase": self.phase,
                "pass": self.pass_number, "prompts": self.prompts, "pass_gap": self.pass_gap,
                "traffic_enabled": self.traffic_enabled,
                "submitted": self.traffic.submitted, "refused": self.traffic.refused}


@dataclass
class InertScenario:
    """A host tier that cannot hit by construction, for the info alert on an inert cache.

    A third of the prompts are shorter than ``min_reusable_tokens`` (``too_short``); the rest
    share one ``head_tokens`` document (whole blocks) and continue with a question of their own,
    and the engine stores one checkpoint per prompt, at its end (``runner.ENGINE_DEFAULTS``). So
    the shared document has pages in the tree but never a row: after the very first long prompt
    (``no_prefix``, nothing stored yet) every long prompt misses ``no_checkpoint``, no prompt
    repeats, and nothing hits. The GPU-resident cache still reuses the document
    (``prompt_tokens.gpu_prefix``)."""

    rate: float = 3.0
    seed: int = 0
    head_tokens: int = 1024
    name: str = "inert"
    traffic_enabled: bool = True
    traffic: TrafficStats = field(default_factory=TrafficStats)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate must be positive, got {self.rate}")
        self.rng = random.Random(self.seed)
        self.head = make_prompt(self.rng, self.head_tokens)
        self.next_at: float | None = None

    def next_prompt(self, engine: SimulatedEngine) -> tuple[int, ...]:
        rng = self.rng
        if rng.random() < 1 / 3:
            short = engine.index.min_reusable_tokens - 1
            return make_prompt(rng, rng.randint(min(10, short), short))
        # A question of two or more row checkpoint intervals (and the token always computed), so
        # that the prompt's one checkpoint lies past the document, never at or inside it.
        tail = rng.randint(2, 9) * engine.config.checkpoint_interval_tokens + 1
        return self.head + tuple(rng.randrange(1000, VOCAB) for _ in range(tail))

    def step(self, engine: SimulatedEngine, now: float) -> float:
        if self.next_at is None:
            self.next_at = now
        if now >= self.next_at:
            prompt = self.next_prompt(engine)
            if self.traffic_enabled:
                self.traffic.submit(engine, prompt, self.rng.randint(16, 64))
            self.next_at = now + min(self.rng.expovariate(self.rate), 5.0 / self.rate)
        return self.next_at - now

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "rate": self.rate, "traffic_enabled": self.traffic_enabled,
                "submitted": self.traffic.submitted, "refused": self.traffic.refused}


@dataclass
class LateReuseScenario:
    """A host tier that stores and never restores, then is reused: the first ``fresh`` prompts
    are all new (each long enough to store its checkpoints, none repeated), so the host tier
    takes their stores and serves no hit; after them the same prompts come back in turn, each
    after more other prompts than the device keeps resident, so each is restored from the host
    tier. At ``rate`` requests a second the stores go on without reuse for ``fresh / rate``
    seconds (30 s at the defaults; ``--rate`` compresses or stretches it)."""

    rate: float = 3.0
    seed: int = 0
    fresh: int = 90
    name: str = "late-reuse"
    traffic_enabled: bool = True
    traffic: TrafficStats = field(default_factory=TrafficStats)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate must be positive, got {self.rate}")
        if self.fresh < 1:
            raise ValueError(f"fresh must be at least 1, got {self.fresh}")
        self.rng = random.Random(self.seed)
        self.prompts = [make_prompt(self.rng, self.rng.randint(600, 2000))
                        for _ in range(self.fresh)]
        self.sent = 0
        self.next_at: float | None = None

    @property
    def phase(self) -> str:
        return "stores without reuse" if self.sent < self.fresh else "reuse from host"

    def step(self, engine: SimulatedEngine, now: float) -> float:
        if self.next_at is None:
            self.next_at = now
        if now >= self.next_at:
            prompt = self.prompts[self.sent % self.fresh]
            if self.traffic_enabled and self.traffic.submit(engine, prompt,
                                                            self.rng.randint(16, 64)):
                self.sent += 1
            self.next_at = now + 1.0 / self.rate
        return self.next_at - now

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "rate": self.rate, "phase": self.phase, "fresh": self.fresh,
                "sent": self.sent, "traffic_enabled": self.traffic_enabled,
                "submitted": self.traffic.submitted, "refused": self.traffic.refused}


@dataclass
class IdleScenario:
    """No background traffic: the engine serves only what clients send (``helios-exporter
    probe``, a load generator). The runner still ticks, so host stores complete on time."""

    name: str = "idle"
    traffic_enabled: bool = False

    def step(self, engine: SimulatedEngine, now: float) -> float:
        return 1.0

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "traffic_enabled": False, "submitted": 0, "refused": 0}
