"""The drill's incidents 1-3, each a story played by tests/e2e/drill/test_drill.py: the engine is
restored while the sidecar watches: a clean restore, requests stuck past the cutoff, a restore
into a new container."""

from __future__ import annotations

import re
import time

import pytest

from tests.e2e.drill.common import ANY_TIME, SAME_ENGINE_CHECKS, firing_block, runbook, titles
from tests.e2e.drill.harness import (
    JOB,
    Drill,
    Incident,
    assert_truthful_resolves,
    at,
    parse_utc,
    utc,
)


# -- 1 -----------------------------------------------------------------------------------------
def clean(drill: Drill, inc: Incident) -> None:
    """A clean restore into the retained container, with the events a runbook sends."""
    started = time.time()
    before = inc.engine_state()
    ok = inc.event("drain_started")
    assert ok.status_code == 200 and ok.json()["accepted"] and ok.json()["window_open"]
    r = inc.restore()
    assert r["phase"] == "draining" and r["window"]["cause"] == "event"  # the engine still admits
    start = r["window"]["start"]
    inc.admin("admission", {"state": "draining"})
    r = inc.wait_phase("drained")
    assert r["admission"]["state"] == "draining" and r["admission"]["inflight_requests"] == 0
    assert r["admission"]["age_seconds"] < 5 and r["window"]["drained"] is True
    assert r["window"]["seconds_to_restore_deadline"] > 1100
    # Prometheus saw the window open: the info alert (helios-null, no text) says so.
    opened = inc.wait_delivery("HeliosRestoreWindowOpen", "firing")
    assert opened.post.receiver == "helios-null"
    inc.admin("crash")
    r = inc.wait_phase("down")
    assert r["window"]["engine_unreachable"]
    # Gone once unreachable for longer than the down grace (1 s), not at the first failed poll.
    r = inc.wait_restore(lambda r: r["window"]["incumbent_gone"], "incumbent gone")
    assert r["phase"] == "down" and r["window"]["engine_unreachable"]
    ok = inc.event("restore_started")
    assert ok.status_code == 200 and ok.json()["phase"] == "restoring"
    inc.admin("restart", {"container": "same"})
    r = inc.wait_restore(lambda r: r["last_window"], "window closed")
    last = r["last_window"]
    assert (last["start"], last["outcome"], last["lost_requests"]) == (start, "in_time", 0)
    assert last["evidence"]["not_before"] == last["end"]  # watched: the time of record itself
    assert r["checks"] == SAME_ENGINE_CHECKS and r["failed_checks"] == []
    assert r["checks_window"] == {"start": start, "end": last["end"], "outcome": "in_time"}
    assert last["incumbent"]["generation"] == before["generation"]
    assert last["restored"]["generation"] == inc.engine_state()["generation"] != before["generation"]
    assert r["last_verified_engine"] == last["restored"] and r["phase"] == "serving"

    # The info alert ended with the window, and nothing else fired.
    resolved = inc.wait_delivery("HeliosRestoreWindowOpen", "resolved")
    assert resolved.post.receiver == "helios-null" and resolved.received_at >= last["end"]
    inc.quiet_until(last["end"])
    assert inc.texts() == []
    assert {(d.labels["alertname"], d.status) for d in inc.deliveries()} == {
        ("HeliosRestoreWindowOpen", "firing"), ("HeliosRestoreWindowOpen", "resolved")}
    # Prometheus agrees: nothing but the info alert fired while the incident ran.
    span = int(time.time() - started) + 1
    assert drill.query(f'count_over_time(ALERTS{{{inc.target.selector},alertstate="firing",'
                       f'alertname!="HeliosRestoreWindowOpen"}}[{span}s])') == []


# -- 2 -----------------------------------------------------------------------------------------
def cutoff(drill: Drill, inc: Incident) -> None:
    """Two requests stuck past the request cutoff (4 s); the engine is stopped with them."""
    name = inc.target.name
    inc.admin("inflight", {"count": 2})
    inc.admin("admission", {"state": "draining"})
    r = inc.wait_restore(lambda r: r["window"], "window open")
    w = r["window"]
    assert r["phase"] == "draining" and w["incumbent_inflight_requests"] == 2
    start, cut, restore = w["start"], w["request_cutoff_deadline"], w["restore_deadline"]
    assert cut == pytest.approx(start + 4)

    page = inc.wait_delivery("HeliosRequestCutoffBreached", "firing", due=cut)
    assert page.post.receiver == "helios-page" and page.received_at >= cut
    assert page.post.body["groupLabels"] == {"cluster": inc.target.cluster, "job": JOB,
                                             "instance": inc.target.instance}
    r = inc.restore()
    # The loss is counted at the first poll past the cutoff; the incumbent still holds them.
    assert r["window"]["lost_requests"] == 2 and r["window"]["incumbent_inflight_requests"] == 2
    fired = inc.wait_text("[FIRING]")
    assert fired.title == f"[FIRING] Helios {name}: HeliosRequestCutoffBreached"
    block = firing_block(fired, f"Incumbent requests in flight after the request cutoff on {name}")
    assert re.search(rf"the incumbent engine on {re.escape(name)} had 2 request\(s\) in flight "
                     rf"\(last seen while it was up\) after the request-cutoff deadline {at(cut)} "
                     rf"of the window opened {at(start)} \(restore deadline {at(restore)}\)\.",
                     block), block
    assert parse_utc(block.split("As of ", 1)[1]) >= cut
    assert re.search(runbook("HeliosRequestCutoffBreached") + "$", block)

    inc.admin("crash")  # the stuck requests die with the incumbent
    inc.wait_delivery("HeliosRequestCutoffBreached", "resolved")
    r = inc.restore()
    assert r["window_open"] and r["window"]["incumbent_gone"]
    assert r["window"]["incumbent_inflight_requests"] == 0 and r["window"]["lost_requests"] == 2
    text = inc.wait_text("[RESOLVED]")
    assert text.title == f"[RESOLVED] Helios {name}: HeliosRequestCutoffBreached"
    assert re.fullmatch(
        rf"RESOLVED at {ANY_TIME}: HeliosRequestCutoffBreached\.\nNo window-closed notice came "
        r"with this resolve: either the incumbent has no request in flight any more \(they "
        r"finished after the cutoff, or it went away or was replaced and they are lost: they "
        r"fail drained_admission when the window closes\), or the window ended without the "
        r"sidecar exporting how\. Check the sidecar's /status\.", text.text.strip()), text.text

    inc.admin("restart", {"container": "same"})
    r = inc.wait_restore(lambda r: r["last_window"], "window closed")
    last = r["last_window"]
    assert (last["outcome"], last["lost_requests"]) == ("in_time", 2)
    assert r["checks"] == {**SAME_ENGINE_CHECKS, "drained_admission": False}
    assert r["failed_checks"] == [{
        "check": "drained_admission", "found": "2 requests lost",
        "expected": "0 requests in flight, admission not open, before the incumbent went away "
                    "and by the request cutoff"}]
    check = inc.wait_delivery("HeliosRestoreCheckFailed", "firing")
    assert check.labels["check"] == "drained_admission" and check.received_at >= last["end"]
    notice = [d for d in check.post.alerts if d["labels"]["alertname"] == "HeliosRestoreWindowClosed"]
    assert [n["labels"]["outcome"] for n in notice] == ["in_time"], check.post.body
    text = inc.wait_text(f"[FIRING] Helios {name}: HeliosRestoreCheckFailed(drained_admission)")
    block = firing_block(text, f"Post-restore check drained_admission failed on {name}")
    assert "the incumbent still had requests in flight when it went away or at the request " \
           "cutoff: they were lost" in block
    assert re.search(
        rf"NOTICE: Restore window on {re.escape(name)} closed in time at {at(last['end'])}\n"
        rf"The restore window on {re.escape(name)} \(opened {at(start)}\) closed in time at "
        rf"{at(last['end'])}\. Requests of the incumbent lost at the cutoff or when it went "
        r"away: 2\.", text.text), text.text

    inc.quiet_until(last["end"])
    texts = inc.texts()
    assert titles(texts, "helios-page") == [
        f"[FIRING] Helios {name}: HeliosRequestCutoffBreached",
        f"[RESOLVED] Helios {name}: HeliosRequestCutoffBreached",
        f"[FIRING] Helios {name}: HeliosRestoreCheckFailed(drained_admission)"]
    assert titles(texts, "helios-ticket") == []
    for t in texts:
        assert_truthful_resolves(t)


# -- 3 -----------------------------------------------------------------------------------------
def container(drill: Drill, inc: Incident) -> None:
    """Restored into a new container: the check pages, stays through a redo window, and resolves
    when the redo restores the retained container (compared with the last verified engine)."""
    name = inc.target.name
    first = inc.engine_state()
    retained = first["container_id"]
    inc.admin("admission", {"state": "draining"})
    inc.wait_phase("drained")
    inc.admin("crash")
    inc.wait_phase("down")
    moved = inc.admin("restart", {"container": "new"})
    r = inc.wait_restore(lambda r: r["last_window"], "window closed")
    assert r["checks"] == {**SAME_ENGINE_CHECKS, "container": False}
    assert r["failed_checks"] == [{"check": "container", "expected": retained,
                                   "found": moved["container_id"]}]
    assert r["last_window"]["incumbent"]["container_id"] == retained
    assert r["last_window"]["restored"]["container_id"] == moved["container_id"]
    assert r["last_verified_engine"]["generation"] == first["generation"]  # not the failed one
    end1 = r["last_window"]["end"]
    page = inc.wait_delivery("HeliosRestoreCheckFailed", "firing")
    assert page.labels["check"] == "container"
    text = inc.wait_text(f"[FIRING] Helios {name}: HeliosRestoreCheckFailed(container)")
    block = firing_block(text, f"Post-restore check container failed on {name}")
    assert "the retained container did not come back" in block
    assert f"NOTICE: Restore window on {name} closed in time at " in text.text

    # The redo: the wrong container is drained and stopped, the retained one restored.
    inc.admin("admission", {"state": "draining"})
    r = inc.wait_phase("drained")
    assert r["window"]["incumbent"]["container_id"] == moved["container_id"]
    assert r["window"]["reference"]["container_id"] == retained
    assert r["window"]["reference"]["generation"] == first["generation"]
    assert r["checks"]["container"] is False  # still the judged restore's, while the redo runs
    # Prometheus evaluates the page firing while it sees the redo window open.
    inc.wait_prom(f'ALERTS{{{inc.target.selector},alertname="HeliosRestoreCheckFailed",'
                  f'alertstate="firing"}} and on (cluster, job, instance) '
                  f'helios_restore_window_open{{{inc.target.selector}}} == 1',
                  "the check page firing during the redo window")
    inc.admin("crash")
    inc.wait_phase("down")
    assert inc.deliveries("HeliosRestoreCheckFailed", "resolved") == []
    redone = inc.admin("restart", {"container_id": retained})
    r = inc.wait_restore(lambda r: r["last_window"]["end"] != end1, "redo closed")
    last = r["last_window"]
    assert r["checks"] == SAME_ENGINE_CHECKS and r["failed_checks"] == []
    assert last["reference"]["container_id"] == retained
    assert last["reference"]["generation"] == first["generation"]
    assert last["incumbent"]["container_id"] == moved["container_id"]
    assert last["restored"]["generation"] == redone["generation"]
    assert r["last_verified_engine"]["generation"] == redone["generation"]

    resolved = inc.wait_delivery("HeliosRestoreCheckFailed", "resolved")
    assert resolved.received_at >= last["end"]
    # One notice per window: the failed restore's ended as the redo's fired; the resolve came
    # with the redo's.
    notices = [(d.status, d.labels["window_end"][:19])
               for d in inc.deliveries("HeliosRestoreWindowClosed")]
    assert notices[0] == ("firing", utc(end1)) and ("resolved", utc(end1)) in notices, notices
    assert [a["labels"]["window_end"][:19] for a in resolved.post.alerts
            if a["labels"]["alertname"] == "HeliosRestoreWindowClosed"
            and a["status"] == "firing"] == [utc(last["end"])], resolved.post.body
    text = inc.wait_text(f"[RESOLVED] Helios {name}: HeliosRestoreCheckFailed(container)")
    # The resolve is explained by the redo's close, not the failed restore's.
    assert re.match(rf"RESOLVED at {ANY_TIME}: HeliosRestoreCheckFailed \(check container\)\.\n"
                    rf"A later restore passed the check: Restore window on {re.escape(name)} "
                    rf"closed in time at {at(last['end'])}\.$", text.blocks()[0]), text.text
    assert re.search(rf"\(opened {at(last['start'])}\) closed in time at {at(last['end'])}",
                     text.text), text.text
    assert utc(end1) not in text.text and "ENDED" not in text.text

    inc.quiet_until(last["end"])
    texts = inc.texts()
    assert titles(texts, "helios-page") == [
        f"[FIRING] Helios {name}: HeliosRestoreCheckFailed(container)",
        f"[RESOLVED] Helios {name}: HeliosRestoreCheckFailed(container)"]
    assert titles(texts, "helios-ticket") == []
    for t in texts:
        assert_truthful_resolves(t)
