"""The end-to-end suite: every test under tests/e2e/ is marked `e2e` (each starts real processes:
the sidecar, the simulated engine, Prometheus, Alertmanager...), and the `stack` fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.procs import stack  # noqa: F401  (fixture)

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)
