"""Helpers of the fault tests: how their sidecars poll, reading its /status and /metrics."""

from __future__ import annotations

from typing import Any

import httpx

from tests.helpers import promtool_check_metrics
from tools.harness import families

# The fault tests' polling, on top of what every sidecar the harness starts gets
# (tools/harness.py serve_args: no NVML, JSON logs).
FAST = ("--poll-interval", "0.2", "--timeout", "0.5")


def status(url: str) -> dict[str, Any]:
    resp = httpx.get(url + "/status", timeout=5.0)
    resp.raise_for_status()
    data: dict[str, Any] = resp.json()
    return data


def scrape(url: str, promtool: bool = True) -> dict[str, Any]:
    """/metrics as {family: Metric}; fails the test unless it is valid exposition."""
    resp = httpx.get(url + "/metrics", timeout=5.0)
    assert resp.status_code == 200
    if promtool:
        promtool_check_metrics(resp.content)
    return families(resp.text)


def post(url: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    resp = httpx.post(url + path, json=body, timeout=5.0)
    resp.raise_for_status()
    data: dict[str, Any] = resp.json()
    return data


def window(url: str) -> dict[str, Any] | None:
    win: dict[str, Any] | None = status(url)["restore"]["window"]
    return win
