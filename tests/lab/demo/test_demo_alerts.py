"""The demo's alert narration on the answers of Alertmanager's /api/v2/alerts and Prometheus's
/api/v1/rules (shapes as the real ones answer; tests/lab/demo/test_demo_run.py runs it against both):
a line when an alert fires, one when it resolves, a pending alert once, nothing in between."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from lab.demo.alerts import AlertNarrator
from lab.demo.story import Stamp

T0 = datetime(2026, 3, 2, 3, 0, tzinfo=UTC)


def am_alert(name: str, starts: float, ends: float, severity: str = "warning",
             state: str = "active", **labels: str) -> dict[str, Any]:
    return {
        "fingerprint": f"fp-{name}-{sorted(labels.items())}",
        "labels": {"alertname": name, "severity": severity, "job": "helios-exporter",
                   "instance": "127.0.0.1:19400", **labels},
        "annotations": {"summary": f"{name} summary\n  on two lines", "description": "long"},
        "startsAt": (T0 + timedelta(seconds=starts)).isoformat().replace("+00:00", "Z"),
        "endsAt": (T0 + timedelta(seconds=ends)).isoformat().replace("+00:00", "Z"),
        "status": {"state": state, "silencedBy": [], "inhibitedBy": []},
    }


class Answers:
    """What Alertmanager and Prometheus answer at each tick, and the time of the tick."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] | None = []
        self.rules: dict[str, Any] = {"status": "success", "data": {"groups": []}}
        self.now = T0

    def get(self, url: str, **_: Any) -> httpx.Response:
        request = httpx.Request("GET", url)
        if url.endswith("/api/v2/alerts"):
            if self.alerts is None:
                raise httpx.ConnectError("refused", request=request)
            return httpx.Response(200, json=self.alerts, request=request)
        return httpx.Response(200, json=self.rules, request=request)


def narrator(answers: Answers) -> AlertNarrator:
    return AlertNarrator(Stamp(lambda: 0.0), "http://am", "http://prom", get=answers.get,
                         now=lambda: answers.now)


def test_fires_once_and_resolves_when_it_leaves_alertmanager() -> None:
    answers = Answers()
    narr = narrator(answers)
    answers.alerts = [am_alert("HeliosRestoreCheckFailed", 0, 240, "critical", check="container")]
    answers.now = T0 + timedelta(seconds=1)
    fired = narr.lines()
    assert fired == ["[+  0.0s] alert    FIRING    HeliosRestoreCheckFailed (critical, "
                     "check=container): HeliosRestoreCheckFailed summary on two lines"]
    assert narr.lines() == []  # still firing: nothing new
    answers.alerts = None  # Alertmanager unreachable for a tick: not a resolve
    assert narr.lines() == []
    answers.alerts = []
    answers.now = T0 + timedelta(seconds=75)
    assert narr.lines() == ["[+  0.0s] alert    resolved  HeliosRestoreCheckFailed (critical, "
                            "check=container) after 75s"]


def test_resolves_when_its_end_passes_and_shows_suppression() -> None:
    answers = Answers()
    narr = narrator(answers)
    answers.alerts = [am_alert("HeliosRestoreBoundAtRisk", 0, 30, bound="restore"),
                      am_alert("HeliosExporterDown", 0, 240, state="suppressed")]
    answers.now = T0 + timedelta(seconds=5)
    lines = narr.lines()
    assert len(lines) == 2 and "HeliosExporterDown (warning) (suppressed)" in lines[1]
    answers.now = T0 + timedelta(seconds=31)  # Prometheus sent the resolve: endsAt has passed
    assert narr.lines() == ["[+  0.0s] alert    resolved  HeliosRestoreBoundAtRisk (warning, "
                            "bound=restore) after 31s"]


def test_a_pending_alert_is_shown_once_after_a_few_seconds() -> None:
    answers = Answers()
    narr = narrator(answers)
    rule = {"name": "HeliosOffloadRowPressureWithPageHeadroom", "duration": 900, "alerts": [{
        "labels": {"alertname": "HeliosOffloadRowPressureWithPageHeadroom", "severity": "info",
                   "job": "helios-exporter", "instance": "127.0.0.1:19400"},
        "annotations": {"summary": "Row-pressure evictions with page headroom"},
        "state": "pending", "activeAt": "2026-03-02T03:00:00.123456789Z"}]}
    answers.rules = {"status": "success", "data": {"groups": [{"rules": [rule]}]}}
    answers.now = T0 + timedelta(seconds=2)
    assert narr.lines() == []  # a blip is not worth a line
    answers.now = T0 + timedelta(seconds=6)
    assert narr.lines() == ["[+  0.0s] alert    pending   HeliosOffloadRowPressureWithPageHeadroom "
                            "(info), fires if it holds for 15m: Row-pressure evictions with page "
                            "headroom"]
    answers.now = T0 + timedelta(seconds=60)
    assert narr.lines() == []
