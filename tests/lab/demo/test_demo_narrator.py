"""The demo's restore narration reads the restore part of /status (as `restore_status` renders it),
including a restore nobody watched and a failed check with its expected and found values."""

from __future__ import annotations

from exporter.restore.report import restore_status
from exporter.restore.window import RestoreState
from lab.demo.story import RestoreNarrator, Stamp
from tests.exporter.restore.restore_helpers import BOUNDS, fail, final, poll, restart


def narrate(*states: RestoreState, generation: str = "g2") -> str:
    narrator = RestoreNarrator(Stamp(lambda: 0.0))
    lines: list[str] = []
    for state in states:
        lines += narrator.lines({"generation": generation,
                                 "restore": restore_status(state, BOUNDS, 500.0)})
    return "\n".join(lines)


def test_open_window_line() -> None:
    out = narrate(final([poll(0, inflight=3), poll(10, admission="draining", inflight=2)]))
    assert "draining   window opened (cause drain)" in out and "incumbent in-flight 2" in out


def test_a_line_only_when_something_changed() -> None:
    state = final([poll(0, inflight=3), poll(10, admission="draining", inflight=2)])
    assert len(narrate(state, state).splitlines()) == 1


def test_restore_nobody_watched_line() -> None:
    state = final([poll(400, generation="g2", container="c2")], state=restart(final([poll(0)])))
    out = narrate(state)
    assert "window closed unobserved;" not in out  # no duration for a restore nobody watched
    assert "window closed unobserved" in out
    assert "container FAILED: expected c1, found c2" in out


def test_closed_window_line() -> None:
    state = final([poll(0), poll(10, admission="closed", inflight=0), fail(20),
                   poll(40, generation="g2")])
    out = narrate(state)
    assert "window closed in_time after 30.0s" in out
    # package and checkpoint are unknown in these polls: not exported, not listed
    assert "checks: 4 passed (image, container, fresh_generation, drained_admission)" in out
