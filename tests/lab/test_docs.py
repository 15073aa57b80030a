"""docs/experiments.md shows what the committed (simulated) evidence says, and says it was
simulated; the evidence itself, which tests read, lives in tests/fixtures/experiments/."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.conftest import ROOT
from tools.experiment_reports import COMPARE_ARGS, REPORTS
from tools.harness import PYTHON

DOC = ROOT / "docs" / "experiments.md"
FIXTURES = "tests/fixtures/experiments"
COMPARE = ["compare", "--baseline", f"{FIXTURES}/arms/baseline/evidence.json", "--candidate",
           f"{FIXTURES}/arms/candidate/evidence.json", *COMPARE_ARGS]


@pytest.mark.e2e
def test_the_compare_output_in_the_doc_is_what_compare_prints() -> None:
    done = subprocess.run([PYTHON, "-m", "commands", *COMPARE], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = re.search(r"<!-- compare output[^>]*-->\n```text\n(.*?)```", DOC.read_text(), re.S)
    assert shown is not None
    assert shown.group(1) == done.stdout, "paste the output of `helios-exporter " + \
        " ".join(COMPARE) + "` into docs/experiments.md (python -m tools.experiment_reports)"
    assert done.stdout.startswith("SIMULATED: ")
    assert done.stdout.splitlines()[-1] == (
        "ADMITTED: every gate holds (simulated evidence); not checked by this gate: functional "
        "acceptance, allocation-safety review, numerical restore review (no --team-record) "
        "(exit 0)")
    # the simulator's snapshot says what it is, in every capture the arms hold
    for arm in ("baseline", "candidate"):
        doc = json.loads((ROOT / FIXTURES / "arms" / arm / "evidence.json").read_text())
        assert {p[edge]["identity"].get("engine") for p in doc["phases"]
                for edge in ("begin", "end")} == {"helios-simulator"}


def test_the_committed_probe_report_shows_the_seed_outcomes() -> None:
    doc = json.loads((ROOT / FIXTURES / "probe" / "evidence.json").read_text())
    verdicts = {p["replay"]: p["verdict"] for p in doc["probes"]}
    assert verdicts == {"reverse/reverse-2": "order_sensitive", "forward/forward-2": "no_reuse",
                        "other-model/forward-2": "incompatible_keys",
                        "control/forward-2": "no_reuse", "small/forward-2": "reuse",
                        "long/forward-2": "reuse"}
    assert all(p["valid"] for p in doc["phases"]) and doc["accounting"] == {}
    # the probes' records travel with the evidence: every pass, what it sent, nothing failed
    assert [(p["phase"], p["failed"]) for p in doc["passes"]] == [
        (p["name"], 0) for p in doc["phases"]]
    readings = {p["replay"]: p["reading"] for p in doc["probes"]}
    assert readings["small/forward-2"] == readings["long/forward-2"] == (
        "same order (forward -> forward): the replay reused what the prime stored; not "
        "evidence of order sensitivity")
    assert "supports order sensitivity" in readings["reverse/reverse-2"]


def test_simulated_evidence_is_labelled_wherever_it_is_shown() -> None:
    for report in REPORTS:
        doc = json.loads((ROOT / FIXTURES / report / "evidence.json").read_text())
        assert doc["simulated"] is True, report
        md = (ROOT / "docs" / "experiments" / report / "evidence.md").read_text()
        assert md.startswith("# Experiment evidence (SIMULATED)\n\n**SIMULATED.**"), report
        assert "![" in md and (ROOT / "docs" / "experiments" / report / "evidence.png").stat().st_size
    # docs/ keeps what a reader needs; the JSON the tests read is a fixture
    assert not list((ROOT / "docs" / "experiments").rglob("*.json"))
    # every link to a simulated report or picture says so beside it
    for line in DOC.read_text().splitlines():
        if re.search(r"\]\(experiments/", line):
            assert "SIMULATED" in line, line
