"""The restore part of /status: what the runbooks send on-call to read there."""

from __future__ import annotations

import json

from exporter.restore.report import restore_status
from exporter.restore.window import RestoreState
from tests.exporter.restore.restore_helpers import BOUNDS, event, fail, final, poll, restart, snap

NOW = 1000.0


def as_json(state: RestoreState, **kw: object) -> dict:
    doc = restore_status(state, BOUNDS, NOW, **kw)  # type: ignore[arg-type]
    return json.loads(json.dumps(doc, allow_nan=False))  # what the endpoint can serve


def test_admission_and_inflight_as_last_seen_with_the_snapshot_age() -> None:
    state = final([poll(0, inflight=3), poll(10, admission="closed", inflight=2)])
    doc = as_json(state, snapshot=snap(admission="closed", inflight=2), snapshot_at=997.5)
    assert doc["phase"] == "draining"  # closed admission, requests still in flight
    assert doc["admission"] == {"state": "closed", "inflight_requests": 2, "generation": "g1",
                                "seen_at": 997.5, "age_seconds": 2.5}
    w = doc["window"]
    assert w["incumbent_inflight_requests"] == 2 and w["last_inflight"] == 2
    assert w["seconds_to_request_cutoff"] == 110 - NOW
    assert w["start_exact"] is True and w["engine_unreachable"] is False


def test_nothing_seen_yet() -> None:
    doc = as_json(RestoreState())
    assert doc["admission"] == {"state": None, "inflight_requests": None, "generation": None,
                                "seen_at": None, "age_seconds": None}
    assert doc["window"] is None and doc["last_window"] is None and doc["failed_checks"] == []


def test_after_a_close_into_the_wrong_container_both_identities_and_the_reason() -> None:
    state = final([poll(0, inflight=2, container="4be1c0ffee12"),
                   poll(10, admission="draining", inflight=2, container="4be1c0ffee12"),
                   fail(20), poll(60, generation="g2", container="9a8b7c6d5e4f", started_at=40)])
    doc = as_json(state)
    assert doc["failed_checks"][0] == {"check": "container", "expected": "4be1c0ffee12",
                                       "found": "9a8b7c6d5e4f"}
    assert doc["failed_checks"][1]["check"] == "drained_admission"
    assert doc["failed_checks"][1]["found"] == "2 requests lost"
    last = doc["last_window"]
    assert last["incumbent"]["container_id"] == "4be1c0ffee12"
    assert last["reference"]["container_id"] == "4be1c0ffee12"
    assert last["restored"]["container_id"] == "9a8b7c6d5e4f"
    assert last["restored"]["started_at"] == 40
    assert last["lost_requests"] == 2 and last["outcome"] == "in_time"
    assert last["evidence"] == {"not_before": 60, "not_after": 60, "start_exact": True}
    assert doc["checks_window"] == {"start": 10, "end": 60, "outcome": "in_time"}
    assert doc["last_verified_engine"]["container_id"] == "4be1c0ffee12"


def test_evidence_of_a_restore_the_sidecar_did_not_watch() -> None:
    down = final([poll(0), poll(10, admission="closed", inflight=0), fail(30)])
    state = final([poll(400, generation="g2", started_at=150)], state=restart(down))
    last = as_json(state)["last_window"]
    assert last["outcome"] == "unobserved"
    assert last["evidence"] == {"not_before": 150, "not_after": 400, "start_exact": True}
    assert last["duration_seconds"] == 390


def test_checks_window_names_the_judged_window_after_an_abort() -> None:
    judged = final([poll(0), poll(10, admission="closed", inflight=0), fail(20),
                    poll(30, generation="g2", container="c2")])
    state = final([poll(100, generation="g2", container="c2", admission="draining", inflight=1),
                   event(120, "abort")], state=judged)
    doc = as_json(state)
    assert doc["last_window"]["outcome"] == "aborted"
    assert doc["checks_window"] == {"start": 10, "end": 30, "outcome": "in_time"}
    assert doc["failed_checks"] == [{"check": "container", "expected": "c1", "found": "c2"}]


def test_an_aborted_outage_says_why_no_window_opens() -> None:
    doc = as_json(final([poll(0), fail(5), fail(16), event(20, "abort"), fail(40)]))
    assert doc["window_open"] is False and doc["outage_aborted"] is True
    assert doc["last_window"]["outcome"] == "aborted"
    assert as_json(final([poll(0)]))["outage_aborted"] is False


def test_a_window_the_incumbent_closed_itself_says_nothing_was_restored() -> None:
    judged = final([poll(0), poll(10, admission="closed", inflight=0), fail(20), fail(31),
                    poll(40, generation="g2", container="c2")])
    state = final([fail(100), fail(111), poll(150, generation="g2", container="c2")],
                  state=judged)
    doc = as_json(state)
    last = doc["last_window"]
    assert last["restored"] is None and last["nothing_restored"] is True
    assert last["reason"].startswith("nothing restored: the incumbent's own incarnation "
                                     "(generation g2) admitted again")
    assert last["incumbent"]["generation"] == "g2" and last["lost_requests"] == 0
    # The checks shown are still those of the restore they judged.
    assert doc["checks_window"] == {"start": 10, "end": 40, "outcome": "in_time"}
    assert doc["failed_checks"] == [{"check": "container", "expected": "c1", "found": "c2"}]
    assert as_json(judged)["last_window"]["reason"] is None


def test_the_last_unplanned_restart_is_shown() -> None:
    doc = as_json(final([poll(0), poll(5, generation="g2")]))
    assert doc["unplanned_restarts"] == 1 and doc["last_unplanned_restart"] == 5
    assert as_json(final([poll(0)]))["last_unplanned_restart"] is None
