"""dashboards/generate.py (`scripts/generate dashboards`): the committed JSON is what the
generator writes, drift is reported with a diff, and thresholds follow alerts/config.yaml."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.dashboards.promql import DASHBOARD_DIR, DASHBOARD_FILES, ROOT
from tests.helpers import run_generate


def _scratch(tmp_path: Path, config: str | None = None) -> Path:
    """A scratch repository root with the alerts config (or `config`) and no dashboards."""
    root = tmp_path / "repo"
    (root / "alerts").mkdir(parents=True)
    text = (ROOT / "alerts" / "config.yaml").read_text(encoding="utf-8")
    (root / "alerts" / "config.yaml").write_text(config or text, encoding="utf-8")
    return root


def test_committed_json_is_what_the_generator_writes(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_generate(capsys, "dashboards", "--check")
    assert status == 0, out + err
    assert out == ""


def test_drift_is_reported_with_a_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _scratch(tmp_path)
    (root / "dashboards").mkdir()
    for name in DASHBOARD_FILES:
        shutil.copy(DASHBOARD_DIR / name, root / "dashboards" / name)
    edited = root / "dashboards" / "helios-offload.json"
    text = edited.read_text(encoding="utf-8")
    assert '"title": "Slab free"' in text
    edited.write_text(text.replace('"title": "Slab free"', '"title": "Slab free (edited)"'),
                      encoding="utf-8")
    (root / "dashboards" / "helios-gpu.json").unlink()
    status, out, err = run_generate(capsys, "dashboards", "--check", "--root", str(root))
    assert status == 1
    assert '-      "title": "Slab free (edited)",' in out
    assert '+      "title": "Slab free",' in out
    assert "helios-gpu.json (generated)" in out  # a missing file is drift too
    assert "helios-restore.json" not in out
    assert "run `scripts/generate`" in err
    assert edited.read_text(encoding="utf-8") != text  # --check writes nothing


def test_generator_writes_every_dashboard(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = _scratch(tmp_path)
    status, _, err = run_generate(capsys, "dashboards", "--root", str(root))
    assert status == 0, err
    out = root / "dashboards"
    assert sorted(p.name for p in out.iterdir()) == sorted(DASHBOARD_FILES)
    for name in DASHBOARD_FILES:
        assert (out / name).read_bytes() == (DASHBOARD_DIR / name).read_bytes()


def test_thresholds_follow_the_alert_config(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    config = (ROOT / "alerts" / "config.yaml").read_text(encoding="utf-8")
    changed = config.replace("power_limit_ratio: 0.98", "power_limit_ratio: 0.9")
    changed = changed.replace("at_risk_margin: 15m", "at_risk_margin: 20m")
    assert changed.count("0.9\n") >= 1 and "20m" in changed
    root = _scratch(tmp_path, changed)
    status, _, err = run_generate(capsys, "dashboards", "--root", str(root))
    assert status == 0, err
    out = root / "dashboards"
    gpu = json.loads((out / "helios-gpu.json").read_text(encoding="utf-8"))
    share = next(p for p in gpu["panels"] if p["title"] == "Power as a share of the limit")
    assert [s["value"] for s in share["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 0.9]
    restore = json.loads((out / "helios-restore.json").read_text(encoding="utf-8"))
    countdown = next(p for p in restore["panels"] if p["title"] == "Time to restore deadline")
    assert countdown["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 1200
