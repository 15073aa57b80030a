"""The simulator's engine shapes (simulator/shapes/) are what
``python -m tools.engine_fixtures shapes`` writes from the committed fixtures:
a fixture re-rendered for a new engine version leaves them stale until they
are written again, and this names the module."""

from __future__ import annotations

import pytest

from tools.engine_fixtures import shapes
from tools.engine_fixtures.engines import ENGINES, Engine


@pytest.mark.parametrize("engine", [ENGINES[name] for name in shapes.SOURCES],
                         ids=lambda e: e.name)
def test_the_committed_shape_is_the_fixtures(engine: Engine) -> None:
    path = shapes.SHAPES / f"{shapes.module_name(engine)}.py"
    assert path.read_text(encoding="utf-8") == shapes.render(engine), (
        f"{path.name} is stale: python -m tools.engine_fixtures shapes")


@pytest.mark.parametrize("engine", [ENGINES[name] for name in shapes.SOURCES],
                         ids=lambda e: e.name)
def test_lazy_families_are_those_absent_before_the_first_event(engine: Engine) -> None:
    rows = shapes.families(engine)
    assert any(row["lazy"] for row in rows) and not all(row["lazy"] for row in rows)
    assert all(row["name"].startswith(engine.name) for row in rows)
