"""The hostile suite: every test under tests/hostile/ is marked `hostile` (hostile engines,
faults, fuzz). A test here that starts a process is marked `e2e` as well, by its fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.process_guard import mark_folder

pytest_collection_modifyitems = mark_folder(Path(__file__).resolve().parent, pytest.mark.hostile)
