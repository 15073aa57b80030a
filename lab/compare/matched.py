"""What `compare` matched: each lane of both arms (Lane) and its repetitions paired in the order
they ran (Pair). Below compare.py and the modules of its gates (gates.py, strict.py), which all read
them."""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.compare.repetitions import LaneArm, Rep


@dataclass
class Pair:
    number: int
    base: Rep
    cand: Rep
    change: float | None = None  # (candidate - baseline) / baseline of the repetition means
    ok: bool | None = None
    why: str = ""


@dataclass
class Lane:
    name: str
    role: str  # primary | protected
    baseline: LaneArm
    candidate: LaneArm
    pairs: list[Pair] = field(default_factory=list)
    change: float | None = None  # of the pooled means, shown, never gating
    refused: bool = False
    named: bool = True  # on the command line (a lane it left out is protected all the same)
