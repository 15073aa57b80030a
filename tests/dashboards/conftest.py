"""Fixtures of the dashboard tests: the generated dashboards, loaded once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dashboards.promql import DASHBOARD_FILES, load


@pytest.fixture(scope="session")
def dashboards() -> dict[str, dict[str, Any]]:
    """File name -> parsed dashboard JSON."""
    return {name: load(name) for name in DASHBOARD_FILES}
