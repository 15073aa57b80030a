"""docs/experiments.md section 7 shows what the committed observer-cost report says, and that
report is what the renderer makes of its JSON (tools/observer_cost_report.py writes them)."""

from __future__ import annotations

import json
import re

from lab.observer_cost.report import MD_FILE, PICTURE_FILE, markdown
from tests.conftest import ROOT
from tools.observer_cost_report import MARKER, result_block

RUN = ROOT / "docs" / "experiments" / "observer-cost"
DATA = ROOT / "tests" / "fixtures" / "experiments" / "observer-cost"
DOC = ROOT / "docs" / "experiments.md"


def test_the_committed_report_is_its_json_rendered() -> None:
    doc = json.loads((DATA / "observer-cost.json").read_text())
    assert (RUN / MD_FILE).read_text() == markdown(doc, PICTURE_FILE, None)
    assert (RUN / PICTURE_FILE).stat().st_size > 10_000
    plan = json.loads((DATA / "plan.json").read_text())
    assert [s["phase"] for s in plan["steps"]] == [s["phase"] for s in doc["steps"]]


def test_the_committed_run_finds_the_simulated_cost() -> None:
    doc = json.loads((DATA / "observer-cost.json").read_text())
    assert doc["simulated"] and doc["simulator_trace_cost"] == 0.05 and doc["conclusive"]
    for r in doc["results"]:
        assert r["source"] == "engine" and r["low"] <= 0.0498 <= r["high"], r


def test_the_page_shows_the_reports_result() -> None:
    shown = re.search(re.escape(MARKER) + r"(.*?)\n\nTop:", DOC.read_text(), re.S)
    assert shown is not None
    assert shown.group(1) == result_block((RUN / MD_FILE).read_text()), (
        "docs/experiments.md section 7 does not show the committed report's result: "
        "python -m tools.observer_cost_report")
