"""Typed reads of decoded JSON for the state files under --state-dir: each raises ValueError
naming the field (`what`), so a damaged file is reported precisely and never half-loaded."""

from __future__ import annotations

import math
from typing import Any


def obj(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"{what}: expected an object")
    return raw


def number(raw: Any, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ValueError(f"{what}: expected a finite number")
    return float(raw)


def string(raw: Any, what: str) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"{what}: expected a string")
    return raw


def opt_str(raw: Any, what: str) -> str | None:
    return None if raw is None else string(raw, what)


def count(raw: Any, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ValueError(f"{what}: expected a count")
    return raw


def opt_count(raw: Any, what: str) -> int | None:
    return None if raw is None else count(raw, what)
