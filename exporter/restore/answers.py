"""Every restore event in every state, answered: the one home of the events table.

`ANSWERS` lists, per event, its rules in order; the first whose situation holds decides. An
accepted event always changes the state (tests/exporter/restore/test_event_answers.py holds that over
random sequences); one that would change nothing is refused (409 with `detail`) and its id is
not recorded, so the same id may be sent again once it can be accepted. docs/restore.md and
docs/interface.md section 6.6 show the table generated from here (`scripts/generate
event-table`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from exporter.restore.model import EVENT_KINDS, RestoreState

Situation = Callable[[RestoreState], bool]


def _no_window(state: RestoreState) -> bool:
    return state.window is None


def _unreachable(state: RestoreState) -> bool:
    return state.window is not None and state.window.unreachable


def _restore_marked(state: RestoreState) -> bool:
    return state.window is not None and state.window.restore_started


def _window_open(state: RestoreState) -> bool:
    return state.window is not None


@dataclass(frozen=True, slots=True)
class Answer:
    event: str
    when: str  # the situation, as the table says it
    holds: Situation
    accepted: bool
    text: str  # accepted: what it does; refused: the 409 `detail` (why, and what to do instead)


UNREACHABLE_REFUSAL: Final = (
    "the engine is unreachable: the window closes when the engine answers again (send abort to "
    "discard a window whose engine will not return)")

ANSWERS: Final[tuple[Answer, ...]] = (
    Answer("drain_started", "no window is open", _no_window, True,
           "opens a window starting now, cause `event`, the engine last seen as its incumbent "
           "(phase `draining`, or `down` while the polls fail)"),
    Answer("drain_started", "a window is open", _window_open, False,
           "a window is already open: its start and deadlines stand (abort it first to start "
           "another)"),
    Answer("restore_started", "no window is open", _no_window, False,
           "no window is open: restore_started marks progress inside one (send drain_started "
           "first)"),
    Answer("restore_started", "restore_started was accepted in this window", _restore_marked,
           False, "restore_started was already accepted in this window"),
    Answer("restore_started", "a window is open", _window_open, True,
           "marks the restore as started (phase `down` becomes `restoring`)"),
    Answer("window_closed", "no window is open", _no_window, False,
           "no window is open: there is nothing to close (send it again after drain_started)"),
    Answer("window_closed", "the engine is unreachable (the latest poll of the window failed)",
           _unreachable, False, UNREACHABLE_REFUSAL),
    Answer("window_closed", "a window is open and the engine answers", _window_open, True,
           "closes the window now and judges it against whatever answers (section 6.3)"),
    Answer("abort", "no window is open", _no_window, False,
           "no window is open: there is nothing to abort"),
    Answer("abort", "a window is open", _window_open, True,
           "discards the window (outcome `aborted`); the checks of the last judged window stand; "
           "while the engine is unreachable, that outage opens no new window"),
)


def answer(state: RestoreState, kind: str) -> Answer:
    """The rule that decides `kind` in `state`."""
    for rule in ANSWERS:
        if rule.event == kind and rule.holds(state):
            return rule
    raise ValueError(f"no answer for {kind!r}")  # the table covers every state: a bug


def refusal(state: RestoreState, kind: str) -> str | None:
    """Why `kind` is refused in `state`, None when it is accepted."""
    rule = answer(state, kind)
    return None if rule.accepted else rule.text


def markdown_table() -> str:
    """The table for docs/restore.md and docs/interface.md section 6.6 (first matching row)."""
    rows = ["| event | when | answer | what it does, or the 409 `detail` |",
            "| --- | --- | --- | --- |"]
    for kind in EVENT_KINDS:
        for rule in ANSWERS:
            if rule.event == kind:
                verdict = "200 accepted" if rule.accepted else "409 refused"
                rows.append(f"| `{kind}` | {rule.when} | {verdict} | {rule.text} |")
    return "\n".join(rows) + "\n"
