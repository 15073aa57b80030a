"""The state file that became readable again, merged with what this process saw meanwhile
(docs/interface.md section 6.7): the keeper never writes over a file it could not read, so
once it can, nothing either side holds is lost.

- **The window**: the one with the earliest start (an exact start over an inexact one at the
  same time) keeps its start, its cause and its incumbent; the other side adds what it saw: the
  incumbent when unknown, progress flags (drained, seen not open, restore started, incumbent
  gone), the lost count when unknown, and the latest observation. What the engine looks like
  now (unreachable, the restored engine, the preflight results) is this process's.
- **A window on file that this process did not see**: it is still open (the engine's
  state decides at the next poll), unless this process closed a window since: then the file's
  window is over and this process's windows stand. The first window this process opened on its
  first look (an inexact start) was the file's outage, seen late: when that is the last one it
  closed, it keeps the start on file.
- **Event ids**: both, the file's first, at most `MAX_EVENT_IDS` (the newest kept).
- **Checks, the judged and the last window**: the side whose judged (last) window ended later.
- **Unplanned restarts**: the file's count plus those this process counted.
"""

from __future__ import annotations

from dataclasses import replace

from exporter.restore.model import MAX_EVENT_IDS, LastWindow, RestoreState, Window


def merge(saved: RestoreState, mem: RestoreState) -> RestoreState:
    """`saved` (read from the file) and `mem` (this process's state since it started)."""
    ids = saved.event_ids + tuple(i for i in mem.event_ids if i not in set(saved.event_ids))
    state = replace(
        mem,
        event_ids=ids[-MAX_EVENT_IDS:],
        last_seen=mem.last_seen or saved.last_seen,
        unplanned_restarts=saved.unplanned_restarts + mem.unplanned_restarts,
        last_unplanned_restart=_latest(saved.last_unplanned_restart, mem.last_unplanned_restart),
    )
    if _ended(saved.judged) > _ended(mem.judged):
        state = replace(state, checks=saved.checks, judged=saved.judged, reference=saved.reference)
    elif mem.reference is None:
        state = replace(state, reference=saved.reference)
    if _ended(saved.last_window) > _ended(mem.last_window):
        state = replace(state, last_window=saved.last_window)
    return _window(state, saved, mem)


def _window(state: RestoreState, saved: RestoreState, mem: RestoreState) -> RestoreState:
    old, new = saved.window, mem.window
    if old is None:
        return state
    closed = mem.last_window
    if closed is not None and closed.start is not None and closed.start >= old.start:
        # This process closed a window since the file's opened: the file's is over.
        if not closed.start_exact:
            # Opened on this process's first look: the same outage, seen late. Its close
            # stands, from the start on file (exact only if the file's was).
            last = replace(closed, start=old.start, start_exact=old.start_exact,
                           incumbent=closed.incumbent or old.incumbent)
            judged = state.judged
            if judged is not None and judged.end == closed.end:
                judged = last
            state = replace(state, last_window=last, judged=judged)
        return state
    if new is None:
        return replace(state, window=old, phase=saved.phase, outage_aborted=saved.outage_aborted)
    first, other = (old, new) if _earlier(old, new) else (new, old)
    merged = replace(
        first,
        incumbent=first.incumbent or other.incumbent,
        last_inflight=new.last_inflight if new.last_inflight is not None else old.last_inflight,
        drained=first.drained or other.drained,
        seen_not_open=first.seen_not_open or other.seen_not_open,
        restore_started=first.restore_started or other.restore_started,
        incumbent_gone=new.incumbent_gone,
        lost=first.lost if first.lost is not None else other.lost,
        lost_at_cutoff=first.lost_at_cutoff if first.lost is not None else other.lost_at_cutoff,
        reference=first.reference or other.reference,
        last_unrestored=_latest(old.last_unrestored, new.last_unrestored),
        restored=new.restored, preflight=new.preflight, unreachable=new.unreachable,
        watched=new.watched,
    )
    return replace(state, window=merged)


def _earlier(a: Window, b: Window) -> bool:
    return a.start < b.start or (a.start == b.start and a.start_exact >= b.start_exact)


def _ended(window: LastWindow | None) -> float:
    return float("-inf") if window is None else window.end


def _latest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)
