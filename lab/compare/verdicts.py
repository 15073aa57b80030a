"""What a gate of `compare` says (its status words and the Gate record), shared by the modules
that make gates (compare.py, strict.py) so that none imports another's."""

from __future__ import annotations

from dataclasses import dataclass

HOLDS, FAILS, NOT_EVALUATED, NOT_APPLICABLE, CANNOT = (
    "holds", "FAILS", "not evaluated", "not applicable", "cannot compare")


@dataclass(frozen=True)
class Gate:
    name: str
    status: str
    detail: str


def pct(value: float, sign: bool = False) -> str:
    """A fraction as a percentage with one decimal; one that rounds to zero is "0.0%", never
    "-0.0%" or "+0.0%"."""
    if round(value * 100, 1) == 0:
        return "0.0%"
    return f"{value:+.1%}" if sign else f"{value:.1%}"
