"""The rows the free page bytes could hold: one expression in the recording rule and on the
offload dashboard's panel (per generation there), beside row pressure."""

from __future__ import annotations

import json
import re

import yaml

from alerts.groups.recording import ROWS_IN_FREE_PAGES
from tests.conftest import ROOT


def bare(expr: str) -> str:
    """The expression without selectors' matchers and whitespace."""
    return re.sub(r"\s+", "", re.sub(r"\{[^}]*\}", "{}", expr))


def test_the_panel_shows_the_recording_rules_expression() -> None:
    rules = yaml.safe_load((ROOT / "alerts" / "helios-recording.yaml").read_text())
    [(group, expr)] = [(g["name"], r["expr"]) for g in rules["groups"] for r in g["rules"]
                       if r.get("record") == ROWS_IN_FREE_PAGES]
    assert group == "helios-offload-pressure.rules"  # with the row-pressure rules
    dashboard = json.loads((ROOT / "dashboards" / "helios-offload.json").read_text())
    panels = {p["title"]: p for p in dashboard["panels"] if "targets" in p}
    panel = panels["Rows the free page bytes could hold"]
    shown = bare(panel["targets"][0]["expr"])
    assert bare(expr) == f"maxwithout(generation)({shown})"
    assert 'kind="page"' in panel["targets"][0]["expr"] and 'kind="row"' in expr
    # beside the row-pressure panel, in the same row of the grid
    titles = [p["title"] for p in dashboard["panels"]]
    assert titles.index("Rows the free page bytes could hold") == \
        titles.index("Row pressure while pages had headroom") + 1
