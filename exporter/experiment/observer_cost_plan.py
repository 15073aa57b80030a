"""The order of an observer-cost run, fixed and written down before the first request.

Per concurrency: one warm-up, then `repetitions` with the observer off and as many on, in an order
drawn from a recorded seed. An order that runs every repetition of one arm before every one of the
other is drawn again: drift over the run (a warming cache, a neighbour's load) would then read as
the observer's cost. Pure: the caller writes `plan_doc()` to plan.json before anything is sent.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Arm = Literal["off", "on"]
ARMS: tuple[Arm, ...] = ("off", "on")
PLAN_FILE = "plan.json"
NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,40}")  # leaves room for "/c<N>/warmup" in a phase name


@dataclass(frozen=True, slots=True)
class Step:
    """One bracketed stretch of traffic: a warm-up (arm None) or a repetition."""

    position: int  # 1-based, in the order run (warm-ups included)
    concurrency: int
    arm: Arm | None
    number: int  # the repetition's number within its arm and concurrency; 0 for a warm-up
    phase: str

    @property
    def warmup(self) -> bool:
        return self.arm is None

    def label(self) -> str:
        return f"C{self.concurrency} warm-up" if self.arm is None else (
            f"C{self.concurrency} {self.arm} {self.number}")


def blocked(order: Sequence[Arm]) -> bool:
    """Every repetition of one arm before every one of the other."""
    first_change = next((i for i in range(1, len(order)) if order[i] != order[0]), len(order))
    return all(a != order[0] for a in order[first_change:])


def draw(repetitions: int, rng: random.Random) -> list[Arm]:
    """`repetitions` off and as many on, shuffled, never blocked (needs repetitions >= 2)."""
    if repetitions < 2:
        raise ValueError("at least 2 repetitions an arm are needed for a spread")
    while True:
        order = [arm for arm in ARMS for _ in range(repetitions)]
        rng.shuffle(order)
        if not blocked(order):
            return order


def plan(name: str, concurrencies: Sequence[int], repetitions: int, seed: int) -> list[Step]:
    """Every step of the run in order: per concurrency its warm-up, then its repetitions."""
    if not NAME_RE.fullmatch(name):
        raise ValueError(f"--name must be 1-40 of A-Z a-z 0-9 . _ -, got {name!r}")
    if not concurrencies or len(set(concurrencies)) != len(concurrencies):
        raise ValueError("--concurrency: give each concurrency once")
    rng = random.Random(seed)
    steps: list[Step] = []
    for c in concurrencies:
        steps.append(Step(len(steps) + 1, c, None, 0, f"{name}/c{c}/warmup"))
        counts = dict.fromkeys(ARMS, 0)
        for arm in draw(repetitions, rng):
            counts[arm] += 1
            steps.append(Step(len(steps) + 1, c, arm, counts[arm],
                              f"{name}/c{c}/{arm}-{counts[arm]}"))
    return steps


def step_json(s: Step) -> dict[str, Any]:
    return {"position": s.position, "concurrency": s.concurrency, "arm": s.arm,
            "number": s.number, "phase": s.phase}


def plan_doc(name: str, seed: int, steps: Sequence[Step], **about: Any) -> dict[str, Any]:
    """plan.json: the order (and everything the run is told) before it starts."""
    return {"format": 1, "name": name, "seed": seed, **about,
            "steps": [step_json(s) for s in steps]}


def parse_concurrency(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--concurrency: expected numbers like 1,4, got {text!r}") from None
    if not values or any(not 1 <= v <= 256 for v in values):
        raise ValueError(f"--concurrency: each must be 1-256, got {text!r}")
    return values
