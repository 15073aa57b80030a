"""The one JSON reader of the lab's input files (evidence.json, probe.json, a semantic verdict, a
corpus line, the simulator's semantic check): bounded in bytes and nesting depth, strict (UTF-8,
no NaN or Infinity), and every failure a JsonInputError with a message, never a traceback.

Python's json module recurses once per nesting level: a file of 100,000 nested brackets raises
RecursionError (not a ValueError), which the readers did not catch. The depth is counted on the
raw bytes before anything is parsed, so no reader ever meets it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

MAX_BYTES: Final = 256 * 1024 * 1024  # an evidence file of a long run is a few MiB
MAX_DEPTH: Final = 64  # evidence.json nests 8 deep
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(rb"[\[\]{}]")


class JsonInputError(ValueError):
    """The input is not JSON this lab reads; the message says why."""


def depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in `data` (strings skipped)."""
    deepest = level = 0
    for match in _BRACKETS.finditer(_STRING.sub(b'""', data)):
        if match.group() in (b"[", b"{"):
            level += 1
            deepest = max(deepest, level)
        else:
            level -= 1
    return deepest


def _constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def loads(data: bytes, what: str, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `data`; `what` names it in the message of a JsonInputError."""
    if len(data) > max_bytes:
        raise JsonInputError(f"{what}: {len(data):,} bytes, more than the {max_bytes:,} read")
    if (deep := depth(data)) > max_depth:
        raise JsonInputError(f"{what}: nested {deep} deep, more than the {max_depth} read")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_constant)
    except UnicodeDecodeError as exc:
        raise JsonInputError(f"{what}: not UTF-8 ({exc.reason})") from None
    except (ValueError, RecursionError) as exc:
        raise JsonInputError(f"{what}: not JSON ({exc})") from None


def read(path: Path, what: str | None = None, max_bytes: int = MAX_BYTES,
         max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of the file at `path`, read no further than `max_bytes` (a larger file is
    refused without reading it whole)."""
    name = what or str(path)
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise JsonInputError(f"{name}: {exc.strerror or exc}") from None
    return loads(data, name, max_bytes, max_depth)
