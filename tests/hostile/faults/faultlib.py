"""Helpers of the fault tests: start a sidecar process, read its /status and /metrics."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.procs import Proc, free_port
from tests.helpers import promtool_check_metrics
from tools.harness import families

FAST = ("--poll-interval", "0.2", "--timeout", "0.5", "--no-nvml", "--log-format", "json")


def sidecar_args(engine_url: str, port: int, state_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "exporter", "serve", "--engine-url", engine_url,
            "--listen", f"127.0.0.1:{port}", "--state-dir", str(state_dir), *FAST, *extra]


def start_sidecar(engine_url: str, state_dir: Path, log: Path, *extra: str,
                  port: int | None = None) -> tuple[Proc, str]:
    port = port or free_port()
    proc = Proc("sidecar", sidecar_args(engine_url, port, state_dir, *extra), log).start()
    return proc, f"http://127.0.0.1:{port}"


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
