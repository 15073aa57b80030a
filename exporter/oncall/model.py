"""What the on-call view shows, independent of how: cells, blocks, sections, and time formatting.

A cell is a tuple of pieces joined by spaces. Pieces that carry a state (`Word`) always carry it
as text ("FAILED", "ok", "unknown"): colour is only ever added on top of the word.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

Tone = Literal["good", "bad", "warn", "neutral"]


@dataclass(frozen=True, slots=True)
class Word:
    """A status word: the text says it, the tone only colours it."""

    text: str
    tone: Tone


@dataclass(frozen=True, slots=True)
class At:
    """An absolute time, shown in UTC."""

    epoch: float


@dataclass(frozen=True, slots=True)
class Until:
    """Time left to a deadline as of the report (negative: passed); the page counts it down."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Since:
    """How long ago something happened, as of the report; the page counts it up."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Code:
    """An identifier (digest, container id, path, field name): monospace, breaks anywhere."""

    text: str


@dataclass(frozen=True, slots=True)
class Link:
    """A link to a path on the sidecar itself (relative, e.g. "status")."""

    text: str
    href: str


Piece = str | Word | At | Until | Since | Code | Link
Cell = tuple[Piece, ...]

OK: Word = Word("ok", "good")
FAILED: Word = Word("FAILED", "bad")
UNKNOWN: Word = Word("unknown", "neutral")
# The word for a whole report, by its tone: the page's title and both summaries. A warning
# with no window open (an unplanned restart, an unobserved restore) is not "WINDOW OPEN".
TONE_WORDS: dict[Tone, str] = {"bad": "FAILED", "warn": "WINDOW OPEN", "good": "ok",
                               "neutral": "unknown"}
NO_WINDOW_WARNING = "WARNING"


@dataclass(frozen=True, slots=True)
class Fields:
    """Label and value, one per row."""

    rows: tuple[tuple[str, Cell], ...]


@dataclass(frozen=True, slots=True)
class Table:
    """Records with named columns; the first cell of each row names the row."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    empty: str = "none"  # said instead of an empty table


@dataclass(frozen=True, slots=True)
class Para:
    cell: Cell


@dataclass(frozen=True, slots=True)
class Steps:
    """What to do, in order."""

    items: tuple[Cell, ...]


Block = Fields | Table | Para | Steps


@dataclass(frozen=True, slots=True)
class Section:
    id: str  # the HTML anchor
    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True, slots=True)
class Report:
    engine_url: str | None
    as_of: float
    tone: Tone  # of the whole: bad when anything failed, warn while a window is open
    summary: tuple[Cell, ...]  # one line each, the most urgent first
    sections: tuple[Section, ...]
    window_open: bool = True

    @property
    def headline(self) -> str:
        """The word for the whole report."""
        if self.tone == "warn" and not self.window_open:
            return NO_WINDOW_WARNING
        return TONE_WORDS[self.tone]


# -- time, the same words on the page, in its script and in the terminal ------------------------
def utc(epoch: float) -> str:
    """ISO 8601 date and time in UTC, said so: `2026-11-30 04:22:00 UTC`."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))
    except (OverflowError, OSError, ValueError):
        return "unknown"


def duration(seconds: float) -> str:
    """`45 s`, `12 min 3 s`, `1 h 10 min 3 s`, `2 d 3 h`: whole units, rounded down."""
    if not math.isfinite(seconds):
        return "unknown"
    s = int(abs(seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min {s} s"
    if minutes:
        return f"{minutes} min {s} s"
    return f"{s} s"


def until(seconds: float) -> str:
    return f"in {duration(seconds)}" if seconds >= 0 else f"passed {duration(seconds)} ago"


def since(seconds: float) -> str:
    return f"{duration(max(0.0, seconds))} ago"


def iso(epoch: float) -> str | None:
    """RFC 3339 in UTC (`2026-11-30T04:22:00Z`), for machine-readable markup; None if invalid."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    except (OverflowError, OSError, ValueError):
        return None


def spaced(cell: Cell) -> list[tuple[str, Piece]]:
    """Each piece with the separator before it: a space, except before punctuation that closes
    (`,` `;` `:` `.` `)`) and after an opening parenthesis."""
    out: list[tuple[str, Piece]] = []
    for i, piece in enumerate(cell):
        if piece == "":
            continue
        tight = i == 0 or not out or (
            isinstance(piece, str) and piece[:1] in ",;:.)") or (
            isinstance(out[-1][1], str) and str(out[-1][1]).endswith("("))
        out.append(("" if tight else " ", piece))
    return out
