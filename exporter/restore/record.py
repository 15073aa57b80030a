"""The time of record of a restore, and its outcome, from evidence only (docs/interface.md
section 6.5).

While the sidecar watches, a restore ends at the observation that closes the window (the poll
that sees the restored engine admit, the passing probe, or a `window_closed` event), and that
observation decides `in_time` or `late`, as the window's start does. When the sidecar did not
watch the end (it was down, and the first thing it saw after its start was the restore already
done), the restore ended within bounds:

- after `not_before`: the latest of the window's start, the last observation (persisted) that saw
  the restore incomplete, and the restored engine's own `started_at` (an engine cannot admit
  before it started; a `started_at` later than the first observation is not believed);
- at or before `end`: the first observation of the restored engine.

`in_time` needs the whole interval within the restore deadline (and a start the sidecar saw),
`late` needs the whole interval past it; anything else is `unobserved`, never a guess.
"""

from __future__ import annotations

from exporter.restore.model import Bounds, Engine, LastWindow, Outcome, Window


def believed_start(engine: Engine | None, end: float) -> float | None:
    """The engine's `started_at` when it can be evidence: not after the first observation."""
    if engine is None or engine.started_at is None or engine.started_at > end:
        return None
    return engine.started_at


def judge(window: Window, end: float, restored: Engine | None,
          bounds: Bounds) -> tuple[Outcome, float]:
    """(outcome, not_before) of `window` closed at `end`."""
    if window.watched:
        not_before = end
    else:
        evidence = (window.start, window.last_unrestored, believed_start(restored, end))
        not_before = max(x for x in evidence if x is not None)
    deadline = window.deadline(bounds, "restore")
    if window.start_exact and end <= deadline:
        return "in_time", not_before
    if not_before > deadline:
        return "late", not_before
    return "unobserved", not_before


def unwatched(reference: Engine | None, previous: Engine, restored: Engine,
              first_seen: float) -> LastWindow:
    """A restore that happened while the sidecar was down: no start, an end bounded by evidence."""
    return LastWindow(start=None, end=first_seen, cause=None, outcome="unobserved",
                      not_before=believed_start(restored, first_seen), start_exact=False,
                      lost=None, incumbent=previous, reference=reference, restored=restored)
