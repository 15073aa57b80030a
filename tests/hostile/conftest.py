"""The hostile suite: every test under tests/hostile/ is marked `hostile` (hostile engines,
faults, fuzz). A test here that starts a process is marked `e2e` as well, by its fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.hostile)
