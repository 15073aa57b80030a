"""Fixtures of the fault tests: the e2e stack, and the hostile engine with a seeded restore state
that test_restore_faults.py and test_restore_durable.py share."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.restore.store import StateStore
from exporter.restore.window import RestoreState
from tests.e2e.procs import stack  # noqa: F401  (fixture)
from tests.hostile.faults.test_restore_faults import draining_engine, seeded_state
from tests.hostile.stub import HostileEngine, running_engine


@pytest.fixture
def engine() -> Iterator[HostileEngine]:
    with running_engine() as eng:
        yield eng


@pytest.fixture
def seed(engine: HostileEngine, tmp_path: Path) -> tuple[Path, RestoreState]:
    """An open window with failed checks and the event ids e-1 and e-2, on disk; the engine
    draining with the same generation."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    state = seeded_state("g-restored-0002", time.time() - 60)
    StateStore(state_dir).save(state)
    draining_engine(engine, "g-restored-0002")
    return state_dir, state
