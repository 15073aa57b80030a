"""The outage scenario: the whole keep-container / restore-retained flow on a short timeline.

    serving --outage_after--> draining --drain_seconds--> closed --closed_seconds--> down
            --down_seconds--> restored (admission open, traffic resumes, stays serving)

While down the engine answers 503 with no snapshot. The variations play the failures the sidecar
must detect: a new container, the old generation, a new image, requests stuck through the drain.
The traffic while serving is steady by default; the demo scenario replays the probe corpus
instead (row pressure while pages sit free), and starts the replay over after the restore.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import structlog

from simulator.engine import SimulatedEngine
from simulator.scenarios import ReverseReplayScenario, SteadyScenario

log = structlog.get_logger("simulator.outage")

Phase = Literal["serving", "draining", "closed", "down", "restored"]
PHASES: tuple[Phase, ...] = ("serving", "draining", "closed", "down", "restored")


@dataclass(frozen=True)
class OutageOptions:
    outage_after: float = 20.0
    drain_seconds: float = 10.0
    closed_seconds: float = 5.0
    down_seconds: float = 20.0
    container: Literal["same", "new"] = "same"
    keep_generation: bool = False
    new_image: bool = False
    stuck_requests: int = 0

    def __post_init__(self) -> None:
        durations = (self.outage_after, self.drain_seconds, self.closed_seconds, self.down_seconds)
        if any(d < 0 for d in durations):
            raise ValueError("outage durations must not be negative")
        if self.stuck_requests < 0:
            raise ValueError("stuck_requests must not be negative")

    def boundaries(self) -> tuple[float, float, float, float]:
        """Seconds after the start at which draining, closed, down and restored begin."""
        drain = self.outage_after
        closed = drain + self.drain_seconds
        down = closed + self.closed_seconds
        return drain, closed, down, down + self.down_seconds


@dataclass
class OutageScenario:
    options: OutageOptions = field(default_factory=OutageOptions)
    rate: float = 3.0
    seed: int = 0
    name: str = "outage"
    # None: steady traffic at ``rate``.
    traffic: SteadyScenario | ReverseReplayScenario | None = None

    def __post_init__(self) -> None:
        if self.traffic is None:
            self.traffic = SteadyScenario(rate=self.rate, seed=self.seed)
        self.serving: SteadyScenario | ReverseReplayScenario = self.traffic
        self.rng = random.Random(self.seed ^ 0x5EED)
        self.phase: Phase = "serving"
        self.started: float | None = None
        self.transitions: list[tuple[Phase, float]] = []
        self.incumbent: dict[str, str] = {}

    @property
    def traffic_enabled(self) -> bool:
        return self.serving.traffic_enabled

    @traffic_enabled.setter
    def traffic_enabled(self, value: bool) -> None:
        self.serving.traffic_enabled = value

    def _enter(self, phase: Phase, engine: SimulatedEngine, now: float) -> None:
        opts = self.options
        if phase == "draining":
            self.incumbent = {"generation": engine.generation, "container_id": engine.container_id,
                              "image_digest": engine.image_digest}
            engine.set_admission("draining")
            if opts.stuck_requests:
                engine.inflight_override = opts.stuck_requests
        elif phase == "closed":
            engine.set_admission("closed")
        elif phase == "down":
            engine.crash()
        elif phase == "restored":
            image = f"sha256:{self.rng.getrandbits(256):064x}" if opts.new_image else None
            generation = self.incumbent.get("generation") if opts.keep_generation else None
            engine.restart(opts.container, generation=generation, image_digest=image)
            if isinstance(self.serving, ReverseReplayScenario):
                self.serving.start_over()
        self.phase = phase
        self.transitions.append((phase, now))
        log.info("outage_phase", phase=phase, generation=engine.generation)

    def step(self, engine: SimulatedEngine, now: float) -> float:
        if self.started is None:
            self.started = now
            self.transitions.append(("serving", now))
        elapsed = now - self.started
        bounds = self.options.boundaries()
        while self.phase != "restored" and elapsed >= bounds[PHASES.index(self.phase)]:
            self._enter(PHASES[PHASES.index(self.phase) + 1], engine, now)
        wait = 0.5
        if self.phase in ("serving", "restored"):
            wait = self.serving.step(engine, now)
        if self.phase != "restored":
            wait = min(wait, bounds[PHASES.index(self.phase)] - elapsed)
        return max(wait, 0.001)

    def describe(self) -> dict[str, Any]:
        started = self.started or 0.0
        return {
            "name": self.name, "phase": self.phase, "rate": self.rate,
            "traffic_enabled": self.traffic_enabled,
            "options": asdict(self.options),
            "timeline": [{"phase": p, "at": t, "elapsed": round(t - started, 3)}
                         for p, t in self.transitions],
            "incumbent": self.incumbent,
            "traffic": self.serving.describe(),
            "submitted": self.serving.traffic.submitted, "refused": self.serving.traffic.refused,
        }
