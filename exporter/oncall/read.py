"""Reading an untrusted `/status` dict: every field may be missing, null or of another type.

The terminal view reads whatever a sidecar of any version answers, so nothing here assumes a
field exists: a missing one reads as None and is shown as "unknown", never as an error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from exporter.oncall.model import FAILED, OK, UNKNOWN, Code, Piece, Word


def field(data: Any, *path: str) -> Any:
    """data[path[0]][path[1]]...; None as soon as a level is missing or not a mapping."""
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def number(value: Any) -> float | None:
    """A finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def text(value: Any) -> Piece:
    """Any JSON value as one piece: None is "unknown", booleans are yes/no."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def code(value: Any) -> Piece:
    """An identifier in monospace; "unknown" when missing."""
    if value is None or value == "":
        return UNKNOWN
    return Code(value if isinstance(value, str) else str(text(value)))


def passed(value: Any) -> Word:
    """True -> ok, False -> FAILED, anything else -> unknown."""
    if value is True:
        return OK
    if value is False:
        return FAILED
    return UNKNOWN
