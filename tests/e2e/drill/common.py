"""What the drill's stories share: bounds, the checks of a restore into the same engine, and how
a notification, its runbook line and Prometheus's view of the window are recognised."""

from __future__ import annotations

import re

import pytest

from tests.e2e.drill.harness import (
    Drill,
    Incident,
    Text,
)

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
