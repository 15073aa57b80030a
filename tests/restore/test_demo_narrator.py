"""The demo's narrator reads the restore part of /status, including a restore nobody watched."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from restore_helpers import BOUNDS, fail, final, poll, restart

from exporter import demo
from exporter.restore.report import restore_status
from exporter.restore.window import RestoreState


def narrate(state: RestoreState, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> str:
    doc = {"generation": "g2", "restore": restore_status(state, BOUNDS, 500.0)}

    def get(url: str, **_: Any) -> httpx.Response:
        return httpx.Response(200, json=doc)

    monkeypatch.setattr(demo.httpx, "get", get)
    demo.Narrator("http://sidecar/status").tick()
    return capsys.readouterr().out


def test_open_window_line(monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    out = narrate(final([poll(0, inflight=3), poll(10, admission="draining", inflight=2)]),
                  monkeypatch, capsys)
    assert "phase draining" in out and "incumbent in-flight 2" in out


def test_restore_nobody_watched_line(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    state = final([poll(400, generation="g2", container="c2")], state=restart(final([poll(0)])))
    out = narrate(state, monkeypatch, capsys)
    assert "last window unobserved; checks:" in out and "container FAILED" in out


def test_closed_window_line(monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    state = final([poll(0), poll(10, admission="closed", inflight=0), fail(20),
                   poll(40, generation="g2")])
    assert "last window in_time after 30.0s" in narrate(state, monkeypatch, capsys)
