"""dashboards/generate.py: the committed JSON is what the generator writes, drift is reported
with a diff, and thresholds follow alerts/config.yaml."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dashboards.promql import DASHBOARD_DIR, DASHBOARD_FILES, ROOT

pytestmark = pytest.mark.e2e  # every test here starts a process

GENERATE = ROOT / "dashboards" / "generate.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GENERATE), *args], capture_output=True, text=True,
                          check=False, timeout=120, cwd=ROOT)


def test_committed_json_is_what_the_generator_writes() -> None:
    result = run("--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_drift_is_reported_with_a_diff(tmp_path: Path) -> None:
    for name in DASHBOARD_FILES:
        shutil.copy(DASHBOARD_DIR / name, tmp_path / name)
    edited = tmp_path / "helios-offload.json"
    text = edited.read_text(encoding="utf-8")
    assert '"title": "Slab free"' in text
    edited.write_text(text.replace('"title": "Slab free"', '"title": "Slab free (edited)"'),
                      encoding="utf-8")
    (tmp_path / "helios-gpu.json").unlink()
    result = run("--check", "--out", str(tmp_path))
    assert result.returncode == 1
    assert '-      "title": "Slab free (edited)",' in result.stdout
    assert '+      "title": "Slab free",' in result.stdout
    assert "helios-gpu.json (generated)" in result.stdout  # a missing file is drift too
    assert "helios-restore.json" not in result.stdout
    assert "run `python dashboards/generate.py`" in result.stderr


def test_generator_writes_every_dashboard(tmp_path: Path) -> None:
    result = run("--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(DASHBOARD_FILES)
    for name in DASHBOARD_FILES:
        assert (tmp_path / name).read_bytes() == (DASHBOARD_DIR / name).read_bytes()


def test_thresholds_follow_the_alert_config(tmp_path: Path) -> None:
    config = (ROOT / "alerts" / "config.yaml").read_text(encoding="utf-8")
    changed = config.replace("power_limit_ratio: 0.98", "power_limit_ratio: 0.9")
    changed = changed.replace("at_risk_margin: 15m", "at_risk_margin: 20m")
    assert changed.count("0.9\n") >= 1 and "20m" in changed
    (tmp_path / "config.yaml").write_text(changed, encoding="utf-8")
    out = tmp_path / "out"
    result = run("--out", str(out), "--config", str(tmp_path / "config.yaml"))
    assert result.returncode == 0, result.stderr
    gpu = json.loads((out / "helios-gpu.json").read_text(encoding="utf-8"))
    share = next(p for p in gpu["panels"] if p["title"] == "Power as a share of the limit")
    assert [s["value"] for s in share["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 0.9]
    restore = json.loads((out / "helios-restore.json").read_text(encoding="utf-8"))
    countdown = next(p for p in restore["panels"] if p["title"] == "Time to restore deadline")
    assert countdown["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 1200
