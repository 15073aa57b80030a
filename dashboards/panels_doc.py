"""docs/dashboards.md's table of each dashboard's panels, from the dashboards themselves: the row,
the panel's title and the first sentence of its description (the tooltip Grafana shows), so a
panel is described once, where it is built. `scripts/generate dashboard-docs` writes them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# A sentence ends at . ! or ? and a space, but not after "e.g." or "i.e.".
_SENTENCE_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+")


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0].removesuffix(".")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _panels(dashboard: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(row title, panel) in dashboard order, panels of collapsed rows included."""
    row = ""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            row = panel["title"]
            for inner in panel.get("panels", []):
                yield row, inner
            continue
        yield row, panel


def panel_table(dashboard: Mapping[str, Any]) -> str:
    lines = ["| row | panel | shows |", "| --- | --- | --- |"]
    shown = None
    for row, panel in _panels(dashboard):
        cells = [row if row != shown else "", panel["title"],
                 first_sentence(panel.get("description", ""))]
        shown = row
        lines.append("|" + "".join(f" {_cell(c)} |" if c else " |" for c in cells))
    return "\n".join(lines)
