"""JSON from outside, parsed within a depth limit: never a RecursionError, never a deep walk.

`json.loads` recurses once per nesting level (a RecursionError past about 1000) and whatever
walks the result afterwards (jsonschema, the snapshot builder) recurses again. So the nesting is
measured first, with C-speed passes over the bytes only (no Python loop per byte or token):
the strings are cut out as the JSON lexer reads them, every byte but the brackets is dropped,
and each pass removes the innermost `[]` pairs, so a document nested N deep is empty after
exactly N passes. At most `max_depth` passes run, each on a shorter text than the one before;
a run of opening brackets longer than the depth left ends it at once. 8 MiB of brackets built
to cost the most passes took 0.3 s (each pass a single call of under 0.1 s, so the event loop
gets its turns in between when this runs in a thread).
"""

from __future__ import annotations

import json
from typing import Any, Final

MAX_DEPTH: Final = 32  # the snapshot nests 4 deep, a completion answer 3
_BRACKETS: Final = b"[]{}"
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in _BRACKETS)
_CURLY_TO_SQUARE: Final = bytes.maketrans(b"{}", b"[]")


class JsonError(ValueError):
    """Not JSON, or nested deeper than allowed; the message never quotes the input."""


def depth_within(body: bytes, max_depth: int) -> bool:
    """True when the JSON text `body` nests at most `max_depth` arrays/objects deep. Text that
    is not JSON may pass: json.loads refuses it then, within the same depth."""
    if body.count(b"[") + body.count(b"{") <= max_depth:  # cheap, and most small bodies
        return True
    # Cut out the strings as the lexer reads them: escaped backslashes, then escaped quotes go
    # first, so every quote left opens or closes a string (one without its close runs to the end).
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(_CURLY_TO_SQUARE, _NOT_BRACKETS)
    for passes in range(max_depth + 1):
        if not brackets:
            return True
        # After `passes` passes, k opens in a row nest passes + k deep: found without a pass each.
        if b"[" * (max_depth - passes + 1) in brackets:
            return False
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):  # `]...][...[` is left: too few opens to go deep
            return True
        brackets = shorter
    return not brackets


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name} is not valid JSON")


def loads(body: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity, at most `max_depth` levels; JsonError else."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonError(f"body is not UTF-8 ({exc.reason})") from None
    if not depth_within(body, max_depth):
        raise JsonError(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:  # not reached within the depth limit; kept as a closed door
        raise JsonError(f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, int-digit limit, NaN/Infinity
        raise JsonError(f"body is not valid JSON: {exc}") from None
