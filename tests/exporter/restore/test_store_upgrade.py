"""State files written by 0.1.0 (tests/fixtures/restore-state) load after an upgrade."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from exporter.restore.store import STATE_FILE, StateStore
from exporter.restore.window import Bounds, Engine, RestoreState, refusal
from tests.exporter.restore.restore_helpers import PREFLIGHT_BOUNDS, event, fail, final, pf, poll

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "restore-state"
T = 1764389520.123456
B = Bounds(4200.0, 5400.0, 60.0)
G1 = Engine("g1", "sha256:aaa", "c1")


def load(name: str, tmp_path: Path) -> RestoreState:
    shutil.copy(FIXTURES / f"{name}.json", tmp_path / STATE_FILE)
    state = StateStore(tmp_path).load()
    assert state is not None
    return state


def test_every_fixture_loads_and_is_rewritten_in_the_current_format(tmp_path: Path) -> None:
    names = sorted(p.stem for p in FIXTURES.glob("*.json"))
    assert names == ["aborted", "closed-container-failed", "open-down", "open-verifying"]
    for name in names:
        d = tmp_path / name
        d.mkdir()
        state = load(name, d)
        StateStore(d).save(state)
        assert StateStore(d).load() == state


def test_open_window_down(tmp_path: Path) -> None:
    s = load("open-down", tmp_path)
    w = s.window
    assert w is not None and s.phase == "restoring"
    assert w.start == T and w.cause == "drain" and w.start_exact
    assert w.incumbent == G1 and w.reference is None and w.compared_with() == G1
    assert w.last_inflight == 2 and w.incumbent_gone and w.incumbent_inflight() == 0
    assert w.restore_started and s.event_ids == ("ev-drain-1", "ev-restore-1")
    assert s.unplanned_restarts == 0 and s.judged is None
    # It was gone with 2 in flight; the next engine closes it against g1, drain failed.
    done = final([poll(T + 600, generation="g2")], B, state=s)
    assert done.window is None
    assert done.checks == {"image": True, "container": True, "fresh_generation": True,
                           "drained_admission": False}
    assert done.last_window is not None and done.last_window.start == T


def test_open_window_down_refuses_window_closed_until_the_engine_answers(tmp_path: Path) -> None:
    # 0.1.0 had no `unreachable`: a window whose phase was down counts as unreachable.
    fixture = FIXTURES / "open-down.json"
    text = fixture.read_text().replace('"phase": "restoring"', '"phase": "down"')
    (tmp_path / STATE_FILE).write_text(text)
    s = StateStore(tmp_path).load()
    assert s is not None and s.window is not None and s.window.unreachable
    assert refusal(s, "window_closed") is not None
    answered = final([poll(T + 100, generation="g2", admission="closed", inflight=0)], B, state=s)
    assert refusal(answered, "window_closed") is None


def test_open_window_verifying(tmp_path: Path) -> None:
    s = load("open-verifying", tmp_path)
    w = s.window
    assert w is not None and s.phase == "verifying"
    assert w.restored == Engine("g2", "sha256:aaa", "c1") and w.preflight == {"direct": True}
    assert w.drained
    done = final([pf(T + 700, "routed")], PREFLIGHT_BOUNDS, state=s)
    assert done.window is None and done.checks["preflight_routed"] is True


def test_closed_with_a_failed_container(tmp_path: Path) -> None:
    s = load("closed-container-failed", tmp_path)
    assert s.window is None and s.checks["container"] is False
    assert s.last_window is not None and s.last_window.outcome == "in_time"
    assert s.last_window.start == T and s.last_window.end == T + 600
    assert s.judged is None and s.reference is None  # 0.1.0 did not keep them
    # Its checks keep paging while the next window is open (an old file included).
    nxt = final([poll(T + 9000, generation="g2", container="c2", admission="draining",
                      inflight=1)], B, state=s)
    assert nxt.window is not None and nxt.checks == s.checks


def test_aborted(tmp_path: Path) -> None:
    s = load("aborted", tmp_path)
    assert s.last_window is not None and s.last_window.outcome == "aborted"
    assert s.checks == {} and s.event_ids == ("ev-abort-1",)
    assert s.last_seen == Engine("g2", "sha256:aaa", "c1")


@pytest.mark.parametrize("name", ["open-down", "closed-container-failed"])
def test_upgrade_then_restart_then_unwatched_detection_uses_the_old_identity(
        name: str, tmp_path: Path) -> None:
    s = load(name, tmp_path)
    assert not s.seen_since_start
    if s.window is None:
        later = final([poll(T + 20000, generation="g3", container="c9")], B, state=s)
        assert later.last_window is not None and later.last_window.outcome == "unobserved"
        assert later.checks["container"] is False
    else:
        later = final([fail(T + 20000), event(T + 20001, "window_closed", "late-close")], B,
                      state=s)
        assert later.window is not None and later.window.start == T
