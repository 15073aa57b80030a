"""Real processes on 127.0.0.1 for end-to-end tests: tools.harness's Stack (the simulator, the
sidecar, Prometheus, Alertmanager) with waits and missing programs as test failures. Every
process started here is stopped by the fixture that started it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.process_guard import process_fixture
from tools import harness
from tools.harness import ROOT, Proc, Stack, WaitFailed, free_port, http_ok, query, wait_until

__all__ = ["ROOT", "Proc", "Stack", "free_port", "http_ok", "need", "query", "stack",
           "start_sidecar", "wait_for"]


def need(binary: str) -> str:
    try:
        return harness.need(binary)
    except harness.NotInstalled as exc:
        pytest.fail(str(exc))


def wait_for(check: Callable[[], Any], timeout: float, what: str, proc: Proc | None = None,
             interval: float = 0.2) -> Any:
    """tools.harness.wait_until, failing the test instead of raising."""
    try:
        return wait_until(check, timeout, what, proc, interval)
    except WaitFailed as exc:
        pytest.fail(str(exc))


def start_sidecar(engine_url: str, log: Path, *extra: str, **options: Any) -> tuple[Proc, str]:
    """tools.harness.start_sidecar, failing the test instead of raising (the sidecar stopped)."""
    try:
        return harness.start_sidecar(engine_url, log, *extra, **options)
    except WaitFailed as exc:
        pytest.fail(str(exc))


@process_fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()
