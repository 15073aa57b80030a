"""Identity checks (image, container, package, checkpoint, fresh_generation) and the reference:
the last verified engine, which a redo is compared with."""

from __future__ import annotations

import pytest

from exporter.restore.checks import reasons
from exporter.restore.window import Engine, RestoreState, step
from tests.exporter.restore.restore_helpers import BOUNDS, event, fail, final, poll, snap

PKG, CKPT = "helios-2.4.1", "ckpt-0042"


def restore(state: RestoreState, at: float, generation: str, container: str = "c1",
            package: str = PKG, checkpoint: str = CKPT, image: str = "sha256:aaa") -> RestoreState:
    """The serving engine drains, goes away and comes back as `generation`."""
    assert state.last_seen is not None
    current = state.last_seen
    kw = {"generation": current.generation, "container": current.container_id,
          "package": current.package, "checkpoint": current.checkpoint,
          "image": current.image_digest}
    return final([poll(at, admission="draining", inflight=1, **kw),  # type: ignore[arg-type]
                  poll(at + 5, admission="closed", inflight=0, **kw),  # type: ignore[arg-type]
                  fail(at + 10),
                  poll(at + 30, generation=generation, container=container, package=package,
                       checkpoint=checkpoint, image=image)], state=state)


def serving() -> RestoreState:
    return final([poll(0, package=PKG, checkpoint=CKPT)])


def test_engine_carries_package_checkpoint_and_start() -> None:
    e = Engine.of(snap(package=PKG, checkpoint=CKPT, started_at=12.5))
    assert (e.package, e.checkpoint, e.started_at) == (PKG, CKPT, 12.5)


@pytest.mark.parametrize(("change", "failed"), [
    ({"package": "helios-2.5.0"}, "package"),
    ({"checkpoint": "ckpt-0043"}, "checkpoint"),
    ({"image": "sha256:bbb"}, "image"),
    ({"container": "c2"}, "container"),
])
def test_each_identity_check_compares_restored_with_incumbent(change: dict, failed: str) -> None:
    s = restore(serving(), 100, "g2", **change)
    assert s.checks[failed] is False
    assert all(ok for name, ok in s.checks.items() if name != failed)
    assert set(s.checks) == {"image", "container", "package", "checkpoint", "fresh_generation",
                             "drained_admission"}


def test_package_and_checkpoint_unknown_are_absent() -> None:
    s = restore(serving(), 100, "g2", package=None, checkpoint=None)  # type: ignore[arg-type]
    assert "package" not in s.checks and "checkpoint" not in s.checks
    assert s.checks["image"] is True


def test_redo_after_a_wrong_container_compares_with_the_verified_engine() -> None:
    failed = restore(serving(), 100, "g2", container="c2")
    assert failed.checks["container"] is False
    # The redo drains g2 (the failed restore, serving in c2) and restores into c1.
    redo_open = final([poll(300, generation="g2", container="c2", package=PKG, checkpoint=CKPT,
                            admission="draining", inflight=2)], state=failed)
    w = redo_open.window
    assert w is not None
    assert w.incumbent is not None and w.incumbent.container_id == "c2"  # whose requests drain
    assert w.reference is not None and w.reference.generation == "g1"  # what it is compared with
    assert w.reference.container_id == "c1"
    redo = restore(failed, 300, "g3", container="c1")
    assert redo.checks["container"] is True and redo.checks["fresh_generation"] is True
    assert redo.judged is not None and redo.judged.reference is not None
    assert redo.judged.reference.generation == "g1"
    assert redo.reference is not None and redo.reference.generation == "g3"  # verified now


def test_redo_into_the_wrong_container_again_still_pages() -> None:
    failed = restore(serving(), 100, "g2", container="c2")
    redo = restore(failed, 300, "g3", container="c2")
    assert redo.checks["container"] is False  # against c1, not against the failed restore's c2
    assert redo.reference is not None and redo.reference.generation == "g1"


def test_redo_reusing_either_earlier_generation_is_not_fresh() -> None:
    failed = restore(serving(), 100, "g2", container="c2")
    for reused in ("g1", "g2"):
        redo = restore(failed, 300, reused, container="c1")
        assert redo.checks["fresh_generation"] is False, reused


def test_verified_restore_becomes_the_reference() -> None:
    s = restore(serving(), 100, "g2")
    assert s.reference is not None and s.reference.generation == "g2"
    nxt = restore(s, 300, "g3", container="c1")
    assert nxt.judged is not None and nxt.judged.reference is not None
    assert nxt.judged.reference.generation == "g2"


def test_lost_requests_alone_do_not_unverify_the_restored_engine() -> None:
    s = final([poll(0, inflight=3), poll(10, admission="draining", inflight=3), fail(20),
               poll(40, generation="g2")])
    assert s.checks["drained_admission"] is False
    assert s.reference is not None and s.reference.generation == "g2"


def test_checks_stay_until_a_restore_is_judged_again() -> None:
    failed = restore(serving(), 100, "g2", container="c2")
    # A drain called off (closed by event, the incumbent never went away): nothing restored.
    s = final([event(300, "drain_started"), poll(305, generation="g2", container="c2"),
               event(310, "window_closed")], state=failed)
    assert s.last_window is not None and s.last_window.end == 310
    assert s.checks == failed.checks and s.judged == failed.judged


def test_reasons_say_expected_and_found() -> None:
    failed = restore(serving(), 100, "g2", container="c2", checkpoint="ckpt-0041")
    got = reasons(failed.checks, failed.judged)
    assert got == [
        {"check": "container", "expected": "c1", "found": "c2"},
        {"check": "checkpoint", "expected": CKPT, "found": "ckpt-0041"},
    ]
    # A restart that kept the generation (another start): a restore, not the incumbent back.
    lost = final([poll(0, inflight=3, started_at=1), poll(10, admission="draining",
                                                             inflight=3, started_at=1),
                  fail(20), poll(40, generation="g1", started_at=35)])
    (fresh, drained) = reasons(lost.checks, lost.judged)
    assert fresh == {"check": "fresh_generation", "expected": "a generation other than g1",
                     "found": "g1"}
    assert drained["check"] == "drained_admission" and drained["found"] == "3 requests lost"


def test_reasons_empty_when_all_passed() -> None:
    s = restore(serving(), 100, "g2")
    assert reasons(s.checks, s.judged) == []
    assert step(s, poll(500, generation="g2"), BOUNDS).checks == s.checks
