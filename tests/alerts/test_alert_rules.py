"""The generated rule files: promtool check/test, fixed names, annotations, runbooks."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

# docs/interface.md section 5: fixed names and severities.
CONTRACT_ALERTS = {
    "HeliosRequestCutoffBreached": "critical",
    "HeliosRestoreBoundAtRisk": "warning",
    "HeliosRestoreBoundBreached": "critical",
    "HeliosRestoreCheckFailed": "critical",
    "HeliosExporterDown": "warning",
    "HeliosEngineSnapshotFailing": "warning",
    "HeliosOffloadRowPressureWithPageHeadroom": "info",
    "HeliosOffloadHostTierNoReuse": "info",
    "HeliosGpuLost": "critical",
    "HeliosGpuPowerAtLimit": "warning",
}
# Extra alerts beyond docs/interface.md section 5, each with a reason in docs/alerts.md.
EXTRA_ALERTS = {"HeliosRestoreWindowOpen": "info"}

RESTORE_ALERTS = (
    "HeliosRequestCutoffBreached",
    "HeliosRestoreBoundAtRisk",
    "HeliosRestoreBoundBreached",
    "HeliosRestoreCheckFailed",
    "HeliosRestoreWindowOpen",
)
# docs/interface.md section 5: the only inputs of the restore alerts.
RESTORE_INPUTS = {
    "helios_restore_window_open",
    "helios_restore_window_start_timestamp_seconds",
    "helios_restore_deadline_timestamp_seconds",
    "helios_engine_inflight_requests",
    "helios_restore_check_ok",
    "up",
}
SELECTOR_RE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _rules(path: Path) -> list[dict[str, Any]]:
    return [rule for group in _load(path)["groups"] for rule in group["rules"]]


@pytest.fixture(scope="module")
def alert_rules(root: Path) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for r in _rules(root / "alerts/helios-alerts.yaml") if "alert" in r}


def test_promtool_check_rules(root: Path, promtool: str) -> None:
    for name in ("helios-alerts.yaml", "helios-recording.yaml"):
        result = subprocess.run(
            [promtool, "check", "rules", str(root / "alerts" / name)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS" in result.stdout


def test_promtool_unit_tests(root: Path, promtool: str) -> None:
    files = sorted((root / "alerts/tests").glob("*.yaml"))
    assert files, "no promtool test files under alerts/tests/"
    # One promtool per file, all at once: each file takes about a second of rule evaluation.
    procs = {
        path.name: subprocess.Popen(
            [promtool, "test", "rules", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for path in files
    }
    failures = []
    for name, proc in procs.items():
        output, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            failures.append(f"{name}:\n{output}")
    assert not failures, "\n".join(failures)


def test_every_alert_has_a_firing_and_a_silent_unit_test(
    root: Path, alert_rules: dict[str, dict[str, Any]]
) -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for path in sorted((root / "alerts/tests").glob("*.yaml")):
        for test in _load(path)["tests"]:
            for case in test.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    assert set(alert_rules) - firing == set(), "alerts without a firing promtool test"
    assert set(alert_rules) - silent == set(), "alerts without a silent promtool test"
    assert firing | silent <= set(alert_rules), "promtool tests name unknown alerts"


def test_alert_names_and_severities_match_the_contract(
    alert_rules: dict[str, dict[str, Any]],
) -> None:
    got = {name: rule["labels"]["severity"] for name, rule in alert_rules.items()}
    assert got == CONTRACT_ALERTS | EXTRA_ALERTS


def test_annotations_and_runbooks(root: Path, alert_rules: dict[str, dict[str, Any]], generate: Any) -> None:
    config = generate.load_config(root / "alerts/config.yaml")
    for name, rule in alert_rules.items():
        assert set(rule["labels"]) == {"severity"}, name
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, name
        assert annotations["runbook_url"] == f"{config.runbook_base_url}/{name}.md"
        runbook = root / "docs/runbooks" / f"{name}.md"
        assert runbook.is_file(), f"missing {runbook}"
        text = runbook.read_text(encoding="utf-8")
        assert text.startswith(f"# {name}"), runbook
        for section in ("## Meaning", "## Confirm", "## Escalate"):
            assert section in text, f"{runbook}: missing {section}"


def test_restore_alerts_only_read_the_contract_inputs(root: Path) -> None:
    rules = _rules(root / "alerts/helios-alerts.yaml")
    recorded = {r["record"]: r["expr"] for r in rules if "record" in r}
    allowed = set(RESTORE_INPUTS)
    for name, expr in recorded.items():
        if set(SELECTOR_RE.findall(expr)) <= RESTORE_INPUTS:
            allowed.add(name)
    for rule in rules:
        if rule.get("alert") not in RESTORE_ALERTS:
            continue
        # PromQL in annotations sits in `...` raw strings passed to the query function.
        queries = [q for a in rule["annotations"].values() for q in re.findall(r"`([^`]*)`", a)]
        texts = [rule["expr"], *queries]
        used = {m for text in texts for m in SELECTOR_RE.findall(text)}
        assert used, rule["alert"]
        assert used <= allowed, f"{rule['alert']} reads {sorted(used - allowed)}"
        # Every remembered input goes through last_over_time, never a bare instant vector
        # alone: the restore-window inputs are absent while the sidecar is down.
        assert "last_over_time(" in rule["expr"], rule["alert"]


def test_alerts_file_works_without_the_recording_file(root: Path, alert_rules: Any) -> None:
    """The alerts may only use recording rules defined in their own file."""
    rules = _rules(root / "alerts/helios-alerts.yaml")
    own = {r["record"] for r in rules if "record" in r}
    for rule in alert_rules.values():
        names = {n for n in SELECTOR_RE.findall(rule["expr"]) if ":" in n}
        assert names <= own, rule["alert"]


def test_recording_rule_names_follow_level_metric_operation(root: Path) -> None:
    for path in ("alerts/helios-recording.yaml", "alerts/helios-alerts.yaml"):
        for rule in _rules(root / path):
            if "record" in rule:
                assert re.fullmatch(r"helios:[a-z0-9_]+:[a-z0-9_]+", rule["record"]), rule


def test_naive_instant_vector_rules_fail_the_host_down_test(
    root: Path, promtool: str, tmp_path: Path
) -> None:
    """The promtool tests can fail: without last_over_time the host-down window goes silent."""
    rules = (root / "alerts/helios-alerts.yaml").read_text(encoding="utf-8")
    naive = re.sub(r"last_over_time\(([^\[]+)\[[0-9a-z]+\]\)", r"\1", rules)
    assert naive != rules
    (tmp_path / "alerts/tests").mkdir(parents=True)
    (tmp_path / "alerts/helios-alerts.yaml").write_text(naive, encoding="utf-8")
    shutil.copy(root / "alerts/helios-recording.yaml", tmp_path / "alerts")
    shutil.copy(root / "alerts/tests/restore_outage.yaml", tmp_path / "alerts/tests")
    result = subprocess.run(
        [promtool, "test", "rules", str(tmp_path / "alerts/tests/restore_outage.yaml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "host or sidecar down in the middle of a window" in result.stdout + result.stderr
