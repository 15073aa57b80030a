"""Each phase encoded once: its entry of the phases file and its entry of GET /experiment/phases.

A phase changes at its two edges only, so its bytes are made when it changes (`Rendered.update`)
and the file and the answer are joins of bytes already made: an edge costs the phase it changed,
never the whole book (deltas and problems of hundreds of phases rebuilt on the event loop at
every GET took up to 1.5 s per request). `fit` bounds the file in bytes below its reader's
limit by dropping the oldest ended phases.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

FILE_HEAD: Final = b'{"format": 1, "phases": ['  # as json.dumps(doc, sort_keys=True) writes it
FILE_TAIL: Final = b"]}"
SEPARATOR: Final = b", "


@dataclass(frozen=True, slots=True)
class Entry:
    stored: bytes  # the phase's entry in the phases file
    shown: bytes  # the phase as GET /experiment/phases shows it


def dumps(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, allow_nan=False).encode()


def file_bytes(entries: Iterable[bytes]) -> bytes:
    return FILE_HEAD + SEPARATOR.join(entries) + FILE_TAIL


def file_size(sizes: Iterable[int]) -> int:
    sizes = list(sizes)
    return len(FILE_HEAD) + len(FILE_TAIL) + sum(sizes) + len(SEPARATOR) * max(0, len(sizes) - 1)


class Rendered:
    """Bytes per phase (by name), made by `stored` and `shown` when a phase is new or changed."""

    def __init__(self, stored: Callable[[Any], dict[str, Any]],
                 shown: Callable[[Any], dict[str, Any]]) -> None:
        self._stored, self._shown = stored, shown
        self._entries: dict[str, tuple[object, Entry]] = {}

    def entry(self, name: str, phase: object) -> Entry:
        held = self._entries.get(name)
        if held is not None and held[0] is phase:
            return held[1]
        entry = Entry(dumps(self._stored(phase)), dumps(self._shown(phase)))
        self._entries[name] = (phase, entry)
        return entry

    def keep_only(self, names: Iterable[str]) -> None:
        keep = set(names)
        for name in [n for n in self._entries if n not in keep]:
            del self._entries[name]


def fit(sizes: list[tuple[bool, int]], budget: int) -> list[int] | None:
    """Indexes of the entries to keep, oldest first, so that the file stays within `budget`
    bytes: the oldest ended entries (open flag False) dropped first. `sizes`: (open, bytes) per
    entry, oldest first. None when even every open entry alone is over the budget."""
    keep = list(range(len(sizes)))
    total = file_size(n for _, n in sizes)
    for i, (is_open, n) in enumerate(sizes):
        if total <= budget:
            break
        if not is_open:
            keep.remove(i)
            total -= n + (len(SEPARATOR) if keep else 0)
    return keep if total <= budget else None
