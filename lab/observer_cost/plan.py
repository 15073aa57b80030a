"""The order of an observer-cost run, fixed and written down before the first request.

Per concurrency (C1 and C4 at least, the observer-cost protocol): one warm-up, then `repetitions` pairs,
each one repetition with the observer off and one with it on, back to back, in an order drawn for
each pair from a recorded seed. Pair n is `off-<n>` and `on-<n>`; the result compares each pair
within itself (stats.py), so drift over the run (a warming cache, a neighbour's load)
has no time to act inside a pair and cannot read as the observer's cost. A draw that puts every
pair in the same order is drawn again: an effect of a repetition's place in its pair would then
read as the observer's. Pure: the caller writes `plan_doc()` to plan.json before anything is sent.
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
MIN_REPETITIONS = 3  # pairs an arm: the observer-cost protocol asks for three off and three on
REQUIRED_CONCURRENCIES = (1, 4)  # the observer-cost protocol: C1 and C4, each warmed on its own


@dataclass(frozen=True, slots=True)
class Step:
    """One bracketed stretch of traffic: a warm-up (arm None) or a repetition."""

    position: int  # 1-based, in the order run (warm-ups included)
    concurrency: int
    arm: Arm | None
    number: int  # the repetition's pair, within its concurrency; 0 for a warm-up
    phase: str

    @property
    def warmup(self) -> bool:
        return self.arm is None

    def label(self) -> str:
        return f"C{self.concurrency} warm-up" if self.arm is None else (
            f"C{self.concurrency} {self.arm} {self.number}")


def draw(pairs: int, rng: random.Random) -> list[tuple[Arm, Arm]]:
    """Each pair's order, drawn; never every pair in the same order (needs pairs >= 2)."""
    if pairs < 2:
        raise ValueError("at least 2 pairs are needed for a spread")
    while True:
        order: list[tuple[Arm, Arm]] = [("off", "on") if rng.random() < 0.5 else ("on", "off")
                                        for _ in range(pairs)]
        if len(set(order)) > 1:
            return order


def plan(name: str, concurrencies: Sequence[int], repetitions: int, seed: int) -> list[Step]:
    """Every step of the run in order: per concurrency its warm-up, then its repetitions."""
    if not NAME_RE.fullmatch(name):
        raise ValueError(f"--name must be 1-40 of A-Z a-z 0-9 . _ -, got {name!r}")
    if not concurrencies or len(set(concurrencies)) != len(concurrencies):
        raise ValueError("--concurrency: give each concurrency once")
    missing = [c for c in REQUIRED_CONCURRENCIES if c not in concurrencies]
    if missing:
        raise ValueError(f"--concurrency {','.join(map(str, concurrencies))}: C1 and C4 must both "
                         f"be measured, each warmed on its own (the observer-cost protocol); "
                         f"{' and '.join(f'C{c}' for c in missing)} missing")
    if repetitions < MIN_REPETITIONS:
        raise ValueError(f"--repetitions {repetitions}: at least {MIN_REPETITIONS} repetitions "
                         "an arm (the observer-cost protocol asks for three off and three on per "
                         "concurrency; fewer leave the interval's spread to one or two pairs)")
    rng = random.Random(seed)
    steps: list[Step] = []
    for c in concurrencies:
        steps.append(Step(len(steps) + 1, c, None, 0, f"{name}/c{c}/warmup"))
        for number, pair in enumerate(draw(repetitions, rng), 1):
            for arm in pair:
                steps.append(Step(len(steps) + 1, c, arm, number, f"{name}/c{c}/{arm}-{number}"))
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
