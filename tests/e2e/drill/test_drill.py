"""The on-call drill (issue 19): five restore incidents and two variants, end to end.

Each incident is played against a simulated engine (its /admin endpoints stand for the engine
team's actions: drain, stop, restore) and a real sidecar (SIGKILLed where the story says so),
scraped by one real Prometheus running the shipped rule files and one real Alertmanager with the
shipped routing, inhibitions and templates, posting to a webhook here (tests/e2e/drill/harness.py).
The operator's side is what the runbooks send: restore events with the bearer token, and
/status. Bounds are compressed to seconds; Prometheus scrapes and evaluates every 1 s,
Alertmanager waits 1 s. Every incident asserts every notification that reached a person on its
target (the page and ticket receivers, as helios.tmpl renders them), every resolve text, the
webhook payloads, and the /status fields the runbooks read.

The incidents run at once (a thread each, their own targets; three start at a time), so the
drill takes about as long as its longest incident; each test reports one incident. A restore
deadline that must fall between two actions is given seconds of margin, and every wait polls
for its condition.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from tests.e2e.drill.harness import (
    JOB,
    Drill,
    Incident,
    Target,
    Text,
    assert_time_left_never_negative,
    assert_truthful_resolves,
    at,
    free_ports,
    parse_utc,
    utc,
)
from tests.process_guard import process_fixture

pytestmark = pytest.mark.e2e

# No deadline near: a restore deadline 15 min or less away raises HeliosRestoreBoundAtRisk
# (a ticket) from the window's first second; 1200 s keeps the clean stories page- and ticket-free.
QUIET_BOUNDS = ("--request-cutoff", "600", "--restore-bound", "1200")
SAME_ENGINE_CHECKS = {"image": True, "container": True, "package": True, "checkpoint": True,
                      "fresh_generation": True, "drained_admission": True}
ANY_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"  # helios.tmpl's StartsAt / EndsAt
ANY_PROM_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \+0000 UTC"  # humanizeTimestamp


def runbook(alertname: str) -> str:
    return rf"\nRunbook: https://\S+/docs/runbooks/{alertname}\.md"


def firing_block(text: Text, summary: str) -> str:
    """The FIRING block of `text` whose summary line is `summary`."""
    found = [b for b in text.blocks() if re.match(rf"FIRING since {ANY_TIME}: {re.escape(summary)}\n", b)]
    assert len(found) == 1, f"{summary!r} in {text.text}"
    return found[0]


def titles(texts: list[Text], receiver: str) -> list[str]:
    """The titles of the notifications on `receiver`, less those a notice sent a tick early.

    A notice is evaluated before the pages it explains (rule order), and Alertmanager's group
    ticks line up with 1 s evaluations: sometimes a tick falls between them, and the notice goes
    out with the pages as they still were (a repeated title, or [NOTICE] alone), the change they
    explain in the next notification, which carries the notice too (asserted where it matters).
    """
    out: list[str] = []
    for t in texts:
        if t.receiver != receiver:
            continue
        if t.title.startswith("[NOTICE]") or (out and t.title == out[-1]):
            assert "\nNOTICE: " in t.text and "RESOLVED at" not in t.text, t.text
            continue
        out.append(t.title)
    return out


def window_seen_by_prometheus(drill: Drill, inc: Incident, start: float) -> None:
    """The start and both deadlines Prometheus scraped for this target never moved."""
    sel = inc.target.selector
    for series, value in ((f"helios_restore_window_start_timestamp_seconds{{{sel}}}", start),
                          (f'helios_restore_deadline_timestamp_seconds{{{sel},bound="restore"}}',
                           None),
                          (f'helios_restore_deadline_timestamp_seconds{{{sel},'
                           f'bound="request_cutoff"}}', None)):
        lo = drill.value(f"min_over_time({series}[5m])")
        hi = drill.value(f"max_over_time({series}[5m])")
        assert lo is not None and lo == hi, f"{series} moved: {lo} .. {hi}"
        if value is not None:
            assert lo == pytest.approx(value, abs=1e-3)


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


# -- 4 -----------------------------------------------------------------------------------------
def sigkill(drill: Drill, inc: Incident) -> None:
    """The sidecar SIGKILLed twice mid-window; the engine is restored on time while it is dead,
    and it comes back after the restore deadline (30 s: room for a slow restart in between)."""
    name = inc.target.name
    inc.admin("admission", {"state": "draining"})
    r = inc.wait_phase("drained")
    window = r["window"]
    start, deadline = window["start"], window["restore_deadline"]
    inc.kill_sidecar()
    inc.start_sidecar()
    w = inc.restore()["window"]
    assert (w["start"], w["restore_deadline"], w["request_cutoff_deadline"]) == (
        start, deadline, window["request_cutoff_deadline"])
    assert w["cause"] == "drain" and w["start_exact"] and w["incumbent"] == window["incumbent"]
    # Prometheus has scraped the open window (the memory the pages below fire from): on a busy
    # machine the sidecar may otherwise be up for less than one scrape between the two kills.
    inc.wait_prom(f"helios_restore_window_open{{{inc.target.selector}}} == 1", "the window scraped")
    inc.admin("crash")
    inc.wait_phase("down")
    inc.kill_sidecar()
    restored = inc.admin("restart", {"container": "same"})
    assert restored["started_at"] < deadline - 2, "the drill needs the restore before the deadline"

    # Past the deadline, Prometheus still remembers the window open: the breach pages.
    page = inc.wait_delivery("HeliosRestoreBoundBreached", "firing", due=deadline)
    assert page.received_at >= deadline
    fired = inc.wait_text(f"[FIRING] Helios {name}: HeliosRestoreBoundBreached")
    block = firing_block(fired, f"Restore bound breached on {name}")
    assert re.search(rf"the window opened {at(start)} on {re.escape(name)} was still open after "
                     rf"its restore deadline {at(deadline)}\. Sidecar: unreachable \(up=0\)\.",
                     block), block

    inc.start_sidecar()
    r = inc.wait_restore(lambda r: r["last_window"], "window closed")
    last = r["last_window"]
    assert last["start"] == start and last["outcome"] == "unobserved"  # never `late`
    ev = last["evidence"]
    assert ev["not_before"] == pytest.approx(restored["started_at"])
    assert ev["not_before"] <= deadline < ev["not_after"] == last["end"] and ev["start_exact"]
    assert r["checks"] == SAME_ENGINE_CHECKS
    window_seen_by_prometheus(drill, inc, start)
    sel = inc.target.selector
    inc.wait_prom(f'helios_restore_last_window_outcome{{{sel},outcome="unobserved"}} == 1',
                  "the outcome scraped")
    assert drill.value(f'helios_restore_last_window_outcome{{{sel},outcome="late"}}') == 0

    resolved = inc.wait_delivery("HeliosRestoreBoundBreached", "resolved")
    notice = [a for a in resolved.post.alerts if a["labels"]["alertname"] == "HeliosRestoreWindowClosed"]
    assert [(a["status"], a["labels"]["outcome"]) for a in notice] == [("firing", "unobserved")]
    text = inc.wait_text(f"[RESOLVED] Helios {name}: HeliosRestoreBoundBreached")
    assert re.match(
        rf"RESOLVED at {ANY_TIME}: HeliosRestoreBoundBreached\.\nRestore window on "
        rf"{re.escape(name)} was restored while the sidecar was down \(outcome unobserved\), "
        rf"found at {at(last['end'])}\.$", text.blocks()[0]), text.text
    at_risk_and_breach_texts(inc, name, last["end"])


def at_risk_and_breach_texts(inc: Incident, name: str, since: float) -> None:
    """The ticket (at risk from the window's start) and the breach page with its resolve, once
    nothing caused at `since` can still be on its way."""
    inc.quiet_until(since)
    texts = inc.texts()
    assert titles(texts, "helios-page") == [
        f"[FIRING] Helios {name}: HeliosRestoreBoundBreached",
        f"[RESOLVED] Helios {name}: HeliosRestoreBoundBreached"]
    tickets = [t for t in texts if t.receiver == "helios-ticket"]
    assert tickets[0].title == f"[FIRING] Helios {name}: HeliosRestoreBoundAtRisk"
    block = firing_block(tickets[0], f"Restore of {name} at risk: its restore deadline is 15m "
                                     "away or less")
    assert re.search(r": \d[\dms. ]*s left \(at-risk margin 15m\)", block), block
    # At the deadline the breach inhibits it; should its resolve slip through first, it says so.
    for t in tickets[1:]:
        assert t.title == f"[RESOLVED] Helios {name}: HeliosRestoreBoundAtRisk", t.title
        assert "No longer at risk: the window closed before its restore deadline, or the " \
               "deadline passed and HeliosRestoreBoundBreached pages from then on." in t.text
    assert len(tickets) <= 2, [t.title for t in tickets]
    for t in texts:
        assert_truthful_resolves(t)
        assert_time_left_never_negative(t)


# -- 5 -----------------------------------------------------------------------------------------
def never_back(drill: Drill, inc: Incident) -> None:
    """The engine never comes back (restore bound 12 s): at risk, then breached; window_closed
    is refused; the breach keeps firing from Prometheus's memory while the sidecar is killed too;
    an abort ends it, and the dead engine opens no new window."""
    name, sel = inc.target.name, inc.target.selector
    inc.admin("admission", {"state": "draining"})
    inc.wait_phase("drained")
    inc.admin("crash")
    r = inc.wait_phase("down")
    start, deadline = r["window"]["start"], r["window"]["restore_deadline"]
    inc.wait_delivery("HeliosRestoreBoundAtRisk", "firing")
    page = inc.wait_delivery("HeliosRestoreBoundBreached", "firing", due=deadline)
    assert page.received_at >= deadline
    fired = inc.wait_text(f"[FIRING] Helios {name}: HeliosRestoreBoundBreached")
    assert "Sidecar: reachable." in firing_block(fired, f"Restore bound breached on {name}")

    # The on-call's first reflex: window_closed. Refused, and the clock does not restart.
    for _ in range(2):  # the refused id is not recorded: the same id is refused again
        refused = inc.event("window_closed", event_id="never-back-closed")
        assert refused.status_code == 409, refused.text
        body = refused.json()
        assert body["accepted"] is False and body["duplicate"] is False
        assert body["window_start"] == start and "unreachable" in body["detail"]
        assert "abort" in body["detail"]
    r = inc.restore()
    assert r["window"]["start"] == start and r["window"]["seconds_to_restore_deadline"] < 0
    assert 'helios_restore_events_total{event="window_closed",result="refused"} 2.0' \
        in inc.metrics()

    # The sidecar dies too: the page keeps firing from Prometheus's memory.
    (before,) = drill.firing(inc.target, "HeliosRestoreBoundBreached")
    inc.kill_sidecar()
    inc.wait_prom(f"up{{{sel}}} == 0", "the sidecar seen down")
    remembered = inc.wait_prom_alert(
        "HeliosRestoreBoundBreached",
        lambda a: "Sidecar: unreachable (up=0)" in a["annotations"]["description"],
        "the breach evaluated from memory")
    assert remembered["activeAt"] == before["activeAt"]  # never stopped firing
    inc.wait_prom(f"count_over_time((up{{{sel}}} == 0)[10s:1s]) >= 4",
                  "more evaluations with the sidecar down")
    (still,) = drill.firing(inc.target, "HeliosRestoreBoundBreached")
    assert still["activeAt"] == before["activeAt"]
    assert inc.deliveries("HeliosRestoreBoundBreached", "resolved") == []

    inc.start_sidecar()
    r = inc.restore()
    assert r["window"]["start"] == start and r["phase"] == "down"
    ok = inc.event("abort")
    assert ok.status_code == 200 and ok.json()["accepted"] and not ok.json()["window_open"]
    r = inc.restore()
    assert r["last_window"]["outcome"] == "aborted" and r["last_window"]["start"] == start
    assert r["outage_aborted"] is True and r["window"] is None
    end = r["last_window"]["end"]

    resolved = inc.wait_delivery("HeliosRestoreBoundBreached", "resolved")
    notice = [a for a in resolved.post.alerts if a["labels"]["alertname"] == "HeliosRestoreWindowClosed"]
    assert [(a["status"], a["labels"]["outcome"]) for a in notice] == [("firing", "aborted")]
    text = inc.wait_text(f"[RESOLVED] Helios {name}: HeliosRestoreBoundBreached")
    assert re.match(rf"RESOLVED at {ANY_TIME}: HeliosRestoreBoundBreached\.\nRestore window on "
                    rf"{re.escape(name)} was aborted at {at(end)}\.$", text.blocks()[0]), text.text
    # The engine is still down: no new window (whose deadlines would page again).
    inc.quiet_until(end)
    r = inc.restore()
    assert r["window_open"] is False and r["outage_aborted"] is True
    assert drill.value(f"helios_restore_window_open{{{sel}}}") == 0
    assert len(inc.deliveries("HeliosRestoreBoundAtRisk", "firing")) == 1
    at_risk_and_breach_texts(inc, name, end)


# -- variants ----------------------------------------------------------------------------------
def closed_while_down(drill: Drill, inc: Incident) -> None:
    """window_closed while the engine is down: 409; the window keeps its start, and the checks
    judge it (the incumbent drained before it stopped) when the engine answers."""
    inc.admin("admission", {"state": "draining"})
    inc.wait_phase("drained")
    inc.admin("crash")
    r = inc.wait_phase("down")
    start = r["window"]["start"]
    refused = inc.event("window_closed")
    assert refused.status_code == 409 and refused.json()["window_start"] == start
    # Polls seeing the engine down well past the down grace (1 s) after the refusal: the window
    # the refused event would have closed is the only one.
    sent = time.time()
    r = inc.wait_restore(lambda r: r["window"]["last_seen_unrestored"] > sent + 2.5,
                         "polls past the down grace")
    assert r["window"]["start"] == start and r["window"]["cause"] == "drain"
    assert r["phase"] == "down"
    inc.admin("restart", {"container": "same"})
    r = inc.wait_restore(lambda r: r["last_window"], "window closed")
    last = r["last_window"]
    assert (last["start"], last["outcome"]) == (start, "in_time")
    assert r["checks"] == SAME_ENGINE_CHECKS  # drained_admission judged on the one window
    window_seen_by_prometheus(drill, inc, start)
    inc.quiet_until(last["end"])
    assert inc.texts() == []
    assert {d.labels["alertname"] for d in inc.deliveries()} == {"HeliosRestoreWindowOpen"}


def unwatched(drill: Drill, inc: Incident) -> None:
    """Nobody watched: the sidecar is down from before the drain until after a restore into a
    new container. It records the restore (`unobserved`) and its failed check pages; a new
    incarnation that no window saw coming is also an unplanned restart: a ticket."""
    name = inc.target.name
    old = inc.engine_state()
    inc.kill_sidecar()
    inc.admin("admission", {"state": "draining"})
    inc.admin("crash")
    new = inc.admin("restart", {"container": "new"})
    inc.start_sidecar()
    r = inc.wait_restore(lambda r: r["last_window"], "restore recorded")
    last = r["last_window"]
    assert (last["start"], last["cause"], last["outcome"]) == (None, None, "unobserved")
    assert last["evidence"]["not_before"] == pytest.approx(new["started_at"])
    assert last["lost_requests"] is None and "drained_admission" not in r["checks"]
    assert r["failed_checks"] == [{"check": "container", "expected": old["container_id"],
                                   "found": new["container_id"]}]
    assert last["incumbent"]["generation"] == old["generation"]
    page = inc.wait_delivery("HeliosRestoreCheckFailed", "firing")
    assert page.labels["check"] == "container"
    text = inc.wait_text(f"[FIRING] Helios {name}: HeliosRestoreCheckFailed(container)")
    assert re.search(
        rf"NOTICE: Restore window on {re.escape(name)} was restored while the sidecar was down "
        rf"\(outcome unobserved\), found at {at(last['end'])}\nThe restore window on "
        rf"{re.escape(name)} \(opened at a time nobody saw: the sidecar was down\) was restored",
        text.text), text.text
    assert r["unplanned_restarts"] == 1 and r["last_unplanned_restart"] == last["end"]
    ticket = inc.wait_text(f"[FIRING] Helios {name}: HeliosEngineRestartedOutsideWindow")
    block = firing_block(ticket, f"Engine on {name} restarted outside a restore window")
    assert re.search(
        rf"The engine on {re.escape(name)} came back as a new incarnation that no restore window "
        rf"saw coming \([\d.]+ time\(s\) in the 1h before {ANY_PROM_TIME}; generation now "
        rf"{re.escape(new['generation'])}\): it restarted while no window was open, or while the "
        r"sidecar itself was down", block), block
    inc.quiet_until(last["end"])
    assert titles(inc.texts(), "helios-page") == [
        f"[FIRING] Helios {name}: HeliosRestoreCheckFailed(container)"]
    assert titles(inc.texts(), "helios-ticket") == [
        f"[FIRING] Helios {name}: HeliosEngineRestartedOutsideWindow"]


# -- running them ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    play: Callable[[Drill, Incident], None]
    cluster: str
    instance: str  # two incidents share each instance name, in different clusters
    bounds: tuple[str, ...]


# The longest stories first: they start first (see STARTING).
INCIDENTS = {
    "sigkill": Plan(sigkill, "us1", "h2:19400", ("--request-cutoff", "10", "--restore-bound", "30")),
    "never_back": Plan(never_back, "eu1", "h3:19400",
                       ("--request-cutoff", "5", "--restore-bound", "12")),
    "cutoff": Plan(cutoff, "us1", "h1:19400", ("--request-cutoff", "4", "--restore-bound", "1200")),
    "container": Plan(container, "eu1", "h2:19400", QUIET_BOUNDS),
    "clean": Plan(clean, "eu1", "h1:19400", QUIET_BOUNDS),
    "closed_while_down": Plan(closed_while_down, "us1", "h3:19400", QUIET_BOUNDS),
    "unwatched": Plan(unwatched, "eu1", "h4:19400", QUIET_BOUNDS),
}
# Engines and sidecars starting at once: a start is mostly imports, CPU-bound; starting them all
# together would starve the other test files running beside the drill (some follow fixed
# timelines) for no gain in the drill's own time.
STARTING = 3


class Running:
    """The incidents being played; `result` waits for one and re-raises its failure."""

    def __init__(self, futures: dict[str, Future[None]]) -> None:
        self.futures = futures

    def result(self, key: str) -> None:
        self.futures[key].result(timeout=240)


@process_fixture(scope="module")
def drill(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    # Only the incidents whose tests were selected (-k) are played.
    selected = {item.callspec.params["incident"] for item in request.session.items
                if item.path == request.path and hasattr(item, "callspec")}
    keys = [k for k in INCIDENTS if k in selected]
    targets = [Target(k, INCIDENTS[k].cluster, INCIDENTS[k].instance, port)
               for k, port in zip(keys, free_ports(len(keys)), strict=True)]
    shared = Drill(tmp_path_factory.mktemp("drill"), targets)
    incidents: list[Incident] = []
    pool = ThreadPoolExecutor(max_workers=max(1, len(keys)), thread_name_prefix="incident")
    starting = threading.Semaphore(STARTING)

    def play(key: str, seed: int) -> None:
        plan = INCIDENTS[key]
        inc = Incident(shared, shared.targets[key], plan.bounds, seed=seed)
        incidents.append(inc)
        try:
            with starting:
                inc.start()
            inc.ready = time.time()
            plan.play(shared, inc)
            inc.assert_payloads()
        finally:
            inc.stop()
            inc.done = time.time()

    try:
        shared.start()
        yield Running({k: pool.submit(play, k, i) for i, k in enumerate(keys)})
    finally:
        pool.shutdown(wait=True)
        for inc in incidents:
            inc.stop()
        shared.stop()
        # How long each incident took to start and to play, for the post-mortem and the budget.
        (shared.workdir / "timings.txt").write_text("".join(
            f"{inc.target.key}: ready {inc.ready - inc.started:.1f} s, played "
            f"{inc.done - inc.ready:.1f} s\n" for inc in incidents if inc.done))


@pytest.mark.parametrize("incident", list(INCIDENTS))
def test_incident(drill: Running, incident: str) -> None:
    """One incident of the drill (its story is the docstring of the function it names)."""
    drill.result(incident)
