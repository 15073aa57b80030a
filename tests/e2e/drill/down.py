"""The drill's incidents 4 and 5 and its two variants, each a story played by
tests/e2e/drill/test_drill.py: something is down through the window: the sidecar SIGKILLed, an
engine that never comes back, window_closed while the engine is down, a restore nobody watched."""

from __future__ import annotations

import re
import time

import pytest

from tests.e2e.drill.common import (
    ANY_PROM_TIME,
    ANY_TIME,
    SAME_ENGINE_CHECKS,
    firing_block,
    titles,
    window_seen_by_prometheus,
)
from tests.e2e.drill.harness import (
    Drill,
    Incident,
    assert_time_left_never_negative,
    assert_truthful_resolves,
    at,
)


# -- 4 -----------------------------------------------------------------------------------------
def sigkill(drill: Drill, inc: Incident) -> None:
    """The sidecar SIGKILLed twice mid-window; the engine is restored on time while it is dead,
    and it comes back after the restore deadline (30 s and the stretch of its plan: room for a
    slow restart in between)."""
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
