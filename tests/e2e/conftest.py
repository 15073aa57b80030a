"""The end-to-end suite: every test under tests/e2e/ is marked `e2e` (each starts real processes:
the sidecar, the simulated engine, Prometheus, Alertmanager...), and the `stack` fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.procs import stack  # noqa: F401  (fixture)
from tests.process_guard import mark_folder

pytest_collection_modifyitems = mark_folder(Path(__file__).resolve().parent, pytest.mark.e2e)
