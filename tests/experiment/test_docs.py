"""docs/experiments.md shows what the committed evidence says."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.conftest import ROOT
from tools.harness import PYTHON

DOC = ROOT / "docs" / "experiments.md"
ARMS = "docs/experiments/arms"
COMPARE = ["compare", "--baseline", f"{ARMS}/baseline/evidence.json", "--candidate",
           f"{ARMS}/candidate/evidence.json", "--primary", "probe-52", "--protected", "small-12",
           "--protected", "long-context", "--allow-difference", "geometry"]


@pytest.mark.e2e
def test_the_compare_output_in_the_doc_is_what_compare_prints() -> None:
    done = subprocess.run([PYTHON, "-m", "exporter", *COMPARE], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = re.search(r"<!-- compare output[^>]*-->\n```text\n(.*?)```", DOC.read_text(), re.S)
    assert shown is not None
    assert shown.group(1) == done.stdout, "paste the output of `helios-exporter " + \
        " ".join(COMPARE) + "` into docs/experiments.md"


def test_the_committed_probe_report_shows_the_seed_outcomes() -> None:
    doc = json.loads((ROOT / "docs" / "experiments" / "probe" / "evidence.json").read_text())
    verdicts = {p["replay"]: p["verdict"] for p in doc["probes"]}
    assert verdicts == {"reverse/reverse-2": "order_sensitive", "forward/forward-2": "no_reuse",
                        "other-model/forward-2": "incompatible_keys",
                        "control/forward-2": "no_reuse", "small/forward-2": "order_sensitive",
                        "long/forward-2": "order_sensitive"}
    assert all(p["valid"] for p in doc["phases"])
    # the probes' records travel with the evidence: every pass, what it sent, nothing failed
    assert [(p["phase"], p["failed"]) for p in doc["passes"]] == [
        (p["name"], 0) for p in doc["phases"]]
    readings = {p["replay"]: p["reading"] for p in doc["probes"]}
    assert readings["small/forward-2"] == readings["long/forward-2"] == (
        "same order (forward -> forward): reuse, not order sensitivity")
    assert "supports order sensitivity" in readings["reverse/reverse-2"]
    md = (ROOT / "docs" / "experiments" / "probe" / "evidence.md").read_text()
    assert "![" in md and (ROOT / "docs" / "experiments" / "probe" / "evidence.png").stat().st_size
