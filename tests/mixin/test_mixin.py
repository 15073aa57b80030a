"""mixin/ with a real jsonnet (Debian's jsonnet): the default _config renders the shipped rule
files byte for byte, and overrides render what the Python generator renders from the same
settings in alerts/config.yaml (byte for byte too), or, for what alerts/config.yaml cannot say
(an alert turned off, another severity), exactly the shipped rules with that change."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import render
from alerts.generate import load_config
from tests.helpers import missing, run_generate

pytestmark = pytest.mark.e2e  # every test runs jsonnet or the generator

ROOT = Path(__file__).resolve().parents[2]
MIXIN = ROOT / "mixin"
SHIPPED = {
    "prometheusAlerts": render.ALERTS_FILE,
    "prometheusRules": render.RECORDING_FILE,
    "heliosDcgmRules": render.DCGM_FILE,
}


def jsonnet_bin() -> str:
    path = shutil.which("jsonnet")
    if path is None:
        missing("jsonnet not installed (Debian package jsonnet)")
    return path


def _override(value: Any) -> str:
    """A _config override as jsonnet: nested objects merged (`+:`), everything else replaced."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}+: {_override(v)}" if isinstance(v, dict)
                               else f"{json.dumps(k)}: {_override(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def jsonnet(field: str, override: dict[str, Any] | None = None, header: str = render.HEADER) -> str:
    code = (f"local h = import 'mixin/lib/helios.libsonnet';\n"
            f"local m = (import 'mixin/mixin.libsonnet') + {{ _config+:: {_override(override or {})} }};\n"
            f"h.manifestRules(m.{field}, {json.dumps(header)})")
    result = subprocess.run([jsonnet_bin(), "-S", "-J", str(ROOT), "-e", code], capture_output=True,
                            text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return result.stdout


def python_render(tmp_path: Path, changes: dict[str, Any]) -> dict[str, str]:
    """The shipped generator's rule files for alerts/config.yaml with `changes` merged in."""
    raw = yaml.safe_load((ROOT / "alerts/config.yaml").read_text(encoding="utf-8"))

    def merge(into: dict[str, Any], change: dict[str, Any]) -> None:
        for k, v in change.items():
            if isinstance(v, dict):
                merge(into.setdefault(k, {}), v)
            else:
                into[k] = v

    merge(raw, changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    config = load_config(path)
    return {"prometheusAlerts": render.render_alerts(config),
            "prometheusRules": render.render_recording(config),
            "heliosDcgmRules": render.render_dcgm(config)}


def test_generated_files_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_generate(capsys, "mixin", "--check")
    assert status == 0, out + err


@pytest.mark.parametrize("field", sorted(SHIPPED))
def test_default_config_renders_the_shipped_files_byte_for_byte(field: str) -> None:
    entry = {"prometheusAlerts": "alerts.jsonnet", "prometheusRules": "rules.jsonnet",
             "heliosDcgmRules": "dcgm-rules.jsonnet"}[field]
    result = subprocess.run([jsonnet_bin(), "-S", str(MIXIN / entry)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (ROOT / SHIPPED[field]).read_text(encoding="utf-8")


def test_dashboards_are_the_shipped_ones() -> None:
    result = subprocess.run([jsonnet_bin(), "-J", str(ROOT), "-e",
                             "(import 'mixin/mixin.libsonnet').grafanaDashboards"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    want = {p.name: json.loads(p.read_text(encoding="utf-8"))
            for p in (ROOT / "dashboards").glob("*.json")}
    assert got == want


def test_the_mixin_renders_from_a_vendored_repository(tmp_path: Path) -> None:
    """Installed as mixin/README.md says (`jb install` of the repository, imported as
    'helios-exporter/mixin/...'), the dashboards' imports reach the one copy in dashboards/."""
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "helios-exporter").symlink_to(ROOT, target_is_directory=True)
    result = subprocess.run([jsonnet_bin(), "-J", str(vendor), "-e",
                             "std.objectFields((import 'helios-exporter/mixin/mixin.libsonnet')"
                             ".grafanaDashboards)"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == sorted(p.name for p in (ROOT / "dashboards").glob("*.json"))


# Overrides alerts/config.yaml can also say: the mixin and the Python generator agree exactly.
OVERRIDES = {
    "selector and cluster label": {"selector": 'job="helios", env="prod"', "cluster_label": "region"},
    "thresholds and durations": {
        "window_memory": "4h",
        "rate_window": "1m",
        "restore": {"at_risk_margin": "30m", "outcome_notice": "10m"},
        "gpu": {"power_limit_ratio": 0.95, "power_avg_window": "10m"},
        "offload": {"page_headroom_ratio": 0.3, "row_pressure_min_attempts": 3},
        "runbook_base_url": "https://runbooks.example.internal/helios/",
    },
    "for and a yes/no setting": {
        "exporter": {"alert_when_no_target": False},
        "for": {"HeliosExporterDown": "0m", "HeliosRestoreWindowOpen": "2m",
                "HeliosGpuPowerAtLimit": "1h30m"},
    },
}


@pytest.mark.parametrize("case", sorted(OVERRIDES))
def test_overrides_render_what_the_generator_renders(case: str, tmp_path: Path) -> None:
    want = python_render(tmp_path, OVERRIDES[case])
    for field in SHIPPED:
        got = jsonnet(field, OVERRIDES[case])
        assert got == want[field], (case, field)
    default = (ROOT / render.ALERTS_FILE).read_text(encoding="utf-8")
    assert want["prometheusAlerts"] != default, "the override changed nothing"


def _rules(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [(g["name"], r) for g in yaml.safe_load(text)["groups"] for r in g["rules"]]


def test_an_alert_turned_off_and_a_severity_changed(tmp_path: Path) -> None:
    override = {"enabled": {"HeliosGpuPowerAtLimit": False, "HeliosGpuLost": False},
                "severity": {"HeliosExporterDown": "critical"}}
    got = jsonnet("prometheusAlerts", override)
    shipped = _rules((ROOT / render.ALERTS_FILE).read_text(encoding="utf-8"))
    want = []
    for group, rule in shipped:
        if rule.get("alert") in ("HeliosGpuPowerAtLimit", "HeliosGpuLost"):
            continue
        if rule.get("alert") == "HeliosExporterDown":
            want.append((group, {**rule, "labels": {**rule["labels"], "severity": "critical"}}))
        else:
            want.append((group, rule))
    assert _rules(got) == want
    # Both GPU alerts gone: their group is gone, not left empty.
    assert "helios-gpu" not in [g["name"] for g in yaml.safe_load(got)["groups"]]
    path = tmp_path / "rules.yaml"
    path.write_text(got, encoding="utf-8")
    promtool = shutil.which("promtool") or missing("promtool not installed")
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"window_memory": "1h"}, "window_memory must exceed the 90-minute restore bound"),
        ({"restore": {"at_risk_margin": "15 minutes"}}, "not a duration (like 90s, 15m or 3h): 15 minutes"),
        ({"target_labels": ["job"]}, "target_labels is fixed in the mixin"),
        ({"for": {"HeliosEngineSnapshotFailing": "2m"}},
         "for.HeliosEngineSnapshotFailing must be shorter than exporter.down_grace"),
    ],
)
def test_a_bad_override_is_an_error_that_says_why(override: dict[str, Any], message: str) -> None:
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        jsonnet("prometheusAlerts", override)
