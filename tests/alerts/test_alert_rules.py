"""The generated rule files: promtool check/test, fixed names, annotations, runbooks."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import groups
from alerts.generate import load_config
from alerts.rules import Alert

# Every alert as declared (alerts/groups/): the interface's are those it promises.
DECLARED: dict[str, Alert] = {a.name: a for a in groups.alerts(load_config())}
CONTRACT_ALERTS = {n: a.severity for n, a in DECLARED.items() if a.promised is not None}
EXTRA_ALERTS = {n: a.severity for n, a in DECLARED.items() if a.promised is None}

RESTORE_ALERTS = (
    "HeliosRequestCutoffBreached",
    "HeliosRestoreBoundAtRisk",
    "HeliosRestoreBoundBreached",
    "HeliosRestoreCheckFailed",
    "HeliosRestoreWindowOpen",
    "HeliosRestoreWindowForgotten",
)
# The interface's only inputs of the restore alerts: what the sidecar exported while a window
# was open, so they work from Prometheus's memory when the sidecar or its host is gone.
RESTORE_INPUTS = {
    "helios_restore_window_open",
    "helios_restore_window_start_timestamp_seconds",
    "helios_restore_deadline_timestamp_seconds",
    "helios_restore_incumbent_inflight_requests",
    "helios_restore_check_ok",
    "up",
}
# HeliosRestoreWindowClosed also reads what the sidecar exports about the window it closed.
CLOSED_NOTICE_INPUTS = RESTORE_INPUTS | {
    "helios_restore_last_window_start_timestamp_seconds",
    "helios_restore_last_window_end_timestamp_seconds",
    "helios_restore_last_window_outcome",
    "helios_restore_last_window_lost_requests",
    "helios_restore_last_window_restored",  # says "nothing restored" in the notice
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
    for name in ("helios-alerts.yaml", "helios-recording.yaml", "optional/helios-dcgm-recording.yaml"):
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
    assert set(DECLARED) - firing == set(), "alerts without a firing promtool test"
    assert set(DECLARED) - silent == set(), "alerts without a silent promtool test"
    assert firing | silent <= set(DECLARED), "promtool tests name undeclared alerts"


def test_every_declared_alert_has_exactly_one_runbook(root: Path) -> None:
    """docs/runbooks/ holds one runbook per declared alert, and none for an alert not declared
    (README.md beside them is their common set-up)."""
    runbooks = sorted(p.stem for p in (root / "docs/runbooks").glob("*.md") if p.name != "README.md")
    assert runbooks == sorted(DECLARED)


def test_alert_names_and_severities_match_the_declarations(
    alert_rules: dict[str, dict[str, Any]],
) -> None:
    got = {name: rule["labels"]["severity"] for name, rule in alert_rules.items()}
    assert got == CONTRACT_ALERTS | EXTRA_ALERTS


def test_the_interface_lists_the_contract_alerts(root: Path) -> None:
    """docs/interface.md's alert table names exactly the interface's alerts, each with its
    severity (the extra alerts are explained in docs/alerts.md instead)."""
    text = (root / "docs/interface.md").read_text(encoding="utf-8")
    section = text.split("\n## 5. Alerts\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(Helios\w+)`(?: \*\(v\d\)\*)? \| (\w+) \|", section, re.M)
    assert dict(rows) == CONTRACT_ALERTS
    assert len(rows) == len(CONTRACT_ALERTS), "an alert listed twice"


def test_the_collector_alert_names_what_each_collector_renders() -> None:
    """HeliosExporterCollectorFailing says what goes missing for every collector of /metrics
    (the closed set of exporter/labels.py), and its Go template chooses by the label."""
    from alerts.groups.exporter import COLLECTOR_SERIES
    from exporter.labels import COLLECTORS

    assert tuple(COLLECTOR_SERIES) == COLLECTORS


def test_annotations_and_runbooks(root: Path, alert_rules: dict[str, dict[str, Any]], generate: Any) -> None:
    config = generate.load_config(root / "alerts/config.yaml")
    for name, rule in alert_rules.items():
        # The one templated label: a notice per window (see alerts/groups/restore_window.py).
        extra = {"window_end"} if name == "HeliosRestoreWindowClosed" else set()
        assert set(rule["labels"]) == {"severity"} | extra, name
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, name
        assert annotations["runbook_url"] == f"{config.runbook_base_url}/{name}.md"
        runbook = root / "docs/runbooks" / f"{name}.md"
        assert runbook.is_file(), f"missing {runbook}"
        text = runbook.read_text(encoding="utf-8")
        assert text.startswith(f"# {name}"), runbook
        for section in ("## Meaning", "## Set up", "## Check", "## Act", "## When it resolves",
                        "## Escalate"):  # their order and contents: tests/repo/runbooks/test_runbooks.py
            assert section in text, f"{runbook}: missing {section}"


def test_restore_alerts_only_read_the_contract_inputs(root: Path) -> None:
    rules = _rules(root / "alerts/helios-alerts.yaml")
    recorded = {r["record"]: r["expr"] for r in rules if "record" in r}
    allowed = set(RESTORE_INPUTS)
    grown = True
    while grown:  # recorded from the inputs, or from records that are (the restore memory)
        grown = False
        for name, expr in recorded.items():
            if name not in allowed and set(SELECTOR_RE.findall(expr)) - {name} <= allowed:
                allowed.add(name)
                grown = True
    closed_allowed = allowed | CLOSED_NOTICE_INPUTS
    for rule in rules:
        name = rule.get("alert")
        if name not in (*RESTORE_ALERTS, "HeliosRestoreWindowClosed"):
            continue
        # PromQL in annotations sits in `...` raw strings passed to the query function.
        queries = [q for a in rule["annotations"].values() for q in re.findall(r"`([^`]*)`", a)]
        texts = [rule["expr"], *queries]
        used = {m for text in texts for m in SELECTOR_RE.findall(text)}
        assert used, name
        ok = closed_allowed if name == "HeliosRestoreWindowClosed" else allowed
        assert used <= ok, f"{name} reads {sorted(used - ok)}"
        # Every remembered input goes through last_over_time or the recorded memory, never a
        # bare instant vector alone: the restore-window inputs are absent while the sidecar is
        # down.
        assert "last_over_time(" in rule["expr"] or ":last_seen{" in rule["expr"], name


def test_cutoff_alert_never_reads_the_current_engines_inflight(
    root: Path, alert_rules: dict[str, dict[str, Any]],
) -> None:
    """The restored engine's own traffic and a crashed incumbent's dead requests never page."""
    expr = alert_rules["HeliosRequestCutoffBreached"]["expr"]
    assert "helios:restore_incumbent_inflight_requests:last_seen{" in expr
    assert "helios_engine_inflight_requests" not in expr
    # ... the memory of the incumbent's count, recorded from it alone.
    recorded = {r["record"]: r["expr"] for r in _rules(root / "alerts/helios-alerts.yaml")
                if "record" in r}
    source = recorded["helios:restore_incumbent_inflight_requests:last6m"]
    assert set(SELECTOR_RE.findall(source)) == {"helios_restore_incumbent_inflight_requests"}


def test_every_join_is_also_on_the_cluster_label(root: Path, generate: Any) -> None:
    config = generate.load_config(root / "alerts/config.yaml")
    on = f"on ({', '.join(config.join_labels)})"
    assert config.join_labels[0] == "cluster"
    for path in ("alerts/helios-alerts.yaml", "alerts/helios-recording.yaml"):
        text = (root / path).read_text(encoding="utf-8")
        joins = re.findall(r"\b(?:on|ignoring) \([^)]*\)", text)
        assert joins, path
        for join in joins:
            # `ignoring (label)` keeps every other label, the cluster included.
            assert join == on or join.startswith("ignoring"), f"{path}: {join}"


def test_alerts_file_works_without_the_recording_file(root: Path, alert_rules: Any) -> None:
    """The alerts may only use recording rules defined in their own file."""
    rules = _rules(root / "alerts/helios-alerts.yaml")
    own = {r["record"] for r in rules if "record" in r}
    for rule in alert_rules.values():
        names = {n for n in SELECTOR_RE.findall(rule["expr"]) if ":" in n}
        assert names <= own, rule["alert"]


def test_recording_rule_names_follow_level_metric_operation(root: Path) -> None:
    for path in (
        "alerts/helios-recording.yaml",
        "alerts/helios-alerts.yaml",
        "alerts/optional/helios-dcgm-recording.yaml",
    ):
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


def test_the_dcgm_group_is_shipped_but_not_loaded_by_default(root: Path) -> None:
    """Optional: outside alerts/*.yaml, so neither the PrometheusRule nor the e2e setups load it."""
    optional = _load(root / "alerts/optional/helios-dcgm-recording.yaml")
    assert [g["name"] for g in optional["groups"]] == ["helios-dcgm.rules"]
    packed = (root / "deploy/kubernetes/prometheusrule.yaml").read_text(encoding="utf-8")
    assert "helios-dcgm.rules" not in packed
    assert "DCGM_FI_DEV" not in packed


def test_notices_are_evaluated_before_the_pages_they_explain(root: Path) -> None:
    """Rules are sent to Alertmanager in group order: a notice first, so no flush separates a
    resolve from the notice that says how it resolved."""
    (restore,) = [g for g in _load(root / "alerts/helios-alerts.yaml")["groups"]
                  if g["name"] == "helios-restore"]
    order = [r.get("alert") for r in restore["rules"]]
    for notice in ("HeliosRestoreWindowClosed", "HeliosRestoreWindowForgotten"):
        for page in ("HeliosRequestCutoffBreached", "HeliosRestoreBoundBreached",
                     "HeliosRestoreCheckFailed"):
            assert order.index(notice) < order.index(page), (notice, page)


def test_promtool_tests_fix_the_order_of_every_group_they_load(root: Path) -> None:
    """promtool evaluates the groups a test file does not order in map order, which varies from
    run to run; the alerts read recording rules of other groups (the restore memory, the offload
    steps), so every file that loads them orders every group it loads."""
    for path in sorted((root / "alerts/tests").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        loaded = [g["name"] for f in doc["rule_files"]
                  for g in yaml.safe_load((path.parent / f).read_text(encoding="utf-8"))["groups"]]
        if not any(f.endswith("helios-alerts.yaml") for f in doc["rule_files"]):
            continue
        order = doc.get("group_eval_order") or []
        assert sorted(order) == sorted(loaded), path.name
        readers = [g for g in order if g in ("helios-restore", "helios-restore-window",
                                                "helios-offload-host-tier", "helios-restore.rules")]
        memory = [g for g in order if g.startswith("helios-restore-memory")
                  or g == "helios-offload-steps"]
        if path.name != "restore_lag.yaml":  # the one that evaluates the memory last
            assert max(map(order.index, memory)) < min(map(order.index, readers)), path.name


SHIPPED_RULE_FILES = ("alerts/helios-alerts.yaml", "alerts/helios-recording.yaml",
                      "alerts/optional/helios-dcgm-recording.yaml",
                      "deploy/kube-prometheus-stack/helios-kps.rules.yaml")


def test_every_group_has_a_limit(root: Path) -> None:
    """A runaway rule (a replica or shard label that leaked into a join) fails its evaluation at
    the limit instead of flooding the store and the pager (alerts/render.py GROUP_LIMIT)."""
    from alerts.render import GROUP_LIMIT

    groups_seen = [(name, g.get("name"), g.get("limit")) for name in SHIPPED_RULE_FILES
                   for g in _load(root / name)["groups"]]
    for kind in ("prometheusrule.yaml",):
        doc = _load(root / "deploy/kubernetes" / kind)
        groups_seen += [(kind, g.get("name"), g.get("limit")) for g in doc["spec"]["groups"]]
    assert groups_seen
    assert [g for g in groups_seen if g[2] != GROUP_LIMIT] == []


@pytest.mark.e2e
def test_vmalert_accepts_every_shipped_rule_file(root: Path) -> None:
    """vmalert rejects a group field it does not know; the groups' `limit` is one it knows."""
    vmalert = shutil.which("vmalert")
    if vmalert is None:
        pytest.fail("vmalert not on PATH: scripts/bootstrap installs Debian's victoria-metrics")
    for name in SHIPPED_RULE_FILES:
        result = subprocess.run([vmalert, "-dryRun", f"-rule={root / name}"], check=False,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
    bogus = root / "alerts/helios-recording.yaml"
    broken = bogus.read_text().replace("limit:", "no_such_field:", 1)
    result = subprocess.run([vmalert, "-dryRun", "-rule=/dev/stdin"], input=broken, check=False,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "no_such_field" in result.stdout + result.stderr


def test_recording_rules_that_read_recorded_series_stay_in_their_group(root: Path) -> None:
    """The restore memory and the host-tier steps read what their own group records (a step
    reads its last step, `last_seen` the steps); a ruler shards by group (docs/scale.md), so each
    recorded series they read is recorded earlier in the same group, never in another."""
    doc = _load(root / "alerts/helios-alerts.yaml")
    where = {r["record"]: (g["name"], i) for g in doc["groups"]
             for i, r in enumerate(g["rules"]) if "record" in r}
    readers = 0
    for g in doc["groups"]:
        for i, rule in enumerate(g["rules"]):
            if "record" not in rule:
                continue
            for name in set(SELECTOR_RE.findall(rule["expr"])) & set(where):
                group, pos = where[name]
                assert group == g["name"], (rule["record"], name, group)
                assert pos <= i, f"{rule['record']} reads {name}, recorded after it"
                readers += 1
    assert readers > 0
