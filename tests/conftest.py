"""Shared test options and fixtures: `--update-golden` rewrites tests/golden/ from the current
output; `procs` starts real processes for one test (tools.harness.Procs) and stops them after.
A test that starts a process is marked `e2e` (tests/process_guard.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.process_guard import (  # noqa: F401  (the marker's hooks)
    process_fixture,
    pytest_collection_modifyitems,
    pytest_runtest_call,
    pytest_runtest_setup,
)
from tools.harness import Procs

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
REAL = FIXTURES / "real"  # captured from real engines and GPUs (see its README)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden files under tests/golden/ instead of comparing")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@process_fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """Child processes of one test (their logs under tmp_path/procs), all stopped after it."""
    p = Procs(tmp_path / "procs")
    try:
        yield p
    finally:
        p.stop_all()
