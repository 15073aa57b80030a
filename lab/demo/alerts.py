"""Alerts as they happen: each alert Alertmanager holds is printed once when it fires and once when
it resolves (it leaves Alertmanager's list, or its endsAt passes); alerts Prometheus holds pending
(a `for:` not yet served) are printed once, so the terminal shows what the alerts page shows
without a line per evaluation."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from lab.demo.story import Stamp

# Labels every alert of the demo carries alike; the others (check, pin, outcome ...) say which.
COMMON_LABELS = frozenset({"alertname", "severity", "job", "instance", "cluster"})
# A pending alert is shown once it has been pending this long: a blip is not worth a line.
PENDING_SHOWN_AFTER_S = 5.0


@dataclass(frozen=True)
class Alert:
    name: str
    severity: str
    labels: dict[str, str]  # the distinguishing ones
    summary: str
    since: datetime | None
    state: str = "active"

    def title(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in sorted(self.labels.items()))
        return f"{self.name} ({self.severity or 'no severity'}{extra})"


def _time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text)
    return None


def _alert(labels: dict[str, str], annotations: dict[str, str], since: object,
           state: str = "active") -> Alert:
    return Alert(name=labels.get("alertname", "?"), severity=labels.get("severity", ""),
                 labels={k: v for k, v in labels.items() if k not in COMMON_LABELS},
                 summary=" ".join(annotations.get("summary", "").split()),
                 since=_time(since), state=state)


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m" if seconds < 7200 else f"{seconds / 3600:.1f}h"


def active_alerts(body: Any, now: datetime) -> dict[str, Alert]:
    """Alertmanager's GET /api/v2/alerts answer: fingerprint -> alert, for alerts not yet ended."""
    out: dict[str, Alert] = {}
    for item in body if isinstance(body, list) else []:
        ends = _time(item.get("endsAt"))
        if ends is not None and ends <= now:
            continue
        state = (item.get("status") or {}).get("state", "active")
        out[str(item.get("fingerprint"))] = _alert(item.get("labels") or {},
                                                   item.get("annotations") or {},
                                                   item.get("startsAt"), state)
    return out


def pending_alerts(body: Any) -> dict[str, tuple[Alert, float]]:
    """Prometheus's GET /api/v1/rules?type=alert answer: the pending alerts, each with its rule's
    `for:` in seconds, keyed by name and labels."""
    out: dict[str, tuple[Alert, float]] = {}
    groups = ((body or {}).get("data") or {}).get("groups") or []
    for group in groups:
        for rule in group.get("rules") or []:
            for item in rule.get("alerts") or []:
                if item.get("state") != "pending":
                    continue
                labels = item.get("labels") or {}
                key = repr(sorted(labels.items()))
                out[key] = (_alert(labels, item.get("annotations") or {}, item.get("activeAt"),
                                   "pending"), float(rule.get("duration") or 0))
    return out


class AlertNarrator:
    """Polls Alertmanager (and Prometheus, for pending alerts) and says what changed."""

    def __init__(self, stamp: Stamp, alertmanager: str, prometheus: str | None = None,
                 get: Callable[..., httpx.Response] = httpx.get,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.stamp = stamp
        self.alertmanager = alertmanager
        self.prometheus = prometheus
        self.get = get
        self.now = now
        self.firing: dict[str, Alert] = {}
        self.pending_shown: set[str] = set()

    def _json(self, url: str, **params: str) -> Any:
        try:
            resp = self.get(url, params=params, timeout=1.0)
            resp.raise_for_status()
            return resp.json()
        except (httpx.HTTPError, ValueError):
            return None  # skip this tick: a missed poll must not read as "resolved"

    def lines(self) -> list[str]:
        now = self.now()
        out: list[str] = []
        if self.prometheus is not None:
            rules = self._json(f"{self.prometheus}/api/v1/rules", type="alert")
            if rules is not None:
                for key, (alert, hold) in pending_alerts(rules).items():
                    age = (now - alert.since).total_seconds() if alert.since else 0.0
                    if key in self.pending_shown or age < PENDING_SHOWN_AFTER_S:
                        continue
                    self.pending_shown.add(key)
                    out.append(self.stamp("alert", f"pending   {alert.title()}, fires if it holds "
                                          f"for {_duration(hold)}: {alert.summary}"))
        body = self._json(f"{self.alertmanager}/api/v2/alerts")
        if body is None:
            return out
        current = active_alerts(body, now)
        for key, alert in current.items():
            if key not in self.firing:
                how = "" if alert.state == "active" else f" ({alert.state})"
                out.append(self.stamp("alert", f"FIRING    {alert.title()}{how}: {alert.summary}"))
        for key, alert in self.firing.items():
            if key not in current:
                took = f" after {_duration((now - alert.since).total_seconds())}" \
                    if alert.since else ""
                out.append(self.stamp("alert", f"resolved  {alert.title()}{took}"))
        self.firing = current
        return out
