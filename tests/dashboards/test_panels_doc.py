"""docs/dashboards.md's panel tables come from the panels (dashboards/panels_doc.py)."""

from __future__ import annotations

from typing import Any

import pytest

from dashboards.panels_doc import first_sentence, panel_table


@pytest.mark.parametrize(("text", "first"), [
    ("Lookups and hits per second. Hits falling means eviction.", "Lookups and hits per second"),
    ("A ratio over a run, e.g. a forward replay. Then more.", "A ratio over a run, e.g. a forward replay"),
    ("Up when it answered. engine_* down is expected.", "Up when it answered"),
    ("One sentence only", "One sentence only"),
    ("", ""),
])
def test_first_sentence(text: str, first: str) -> None:
    assert first_sentence(text) == first


def test_rows_are_named_once_and_collapsed_rows_are_read() -> None:
    dashboard: dict[str, Any] = {"panels": [
        {"type": "row", "title": "Now"},
        {"type": "stat", "title": "A", "description": "Shows a | b. More."},
        {"type": "stat", "title": "B"},
        {"type": "row", "title": "Later", "panels": [{"type": "timeseries", "title": "C",
                                                      "description": "Hidden until opened."}]},
    ]}
    assert panel_table(dashboard).splitlines()[2:] == [
        "| Now | A | Shows a \\| b |",
        "| | B | |",
        "| Later | C | Hidden until opened |",
    ]
