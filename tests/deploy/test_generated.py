"""deploy/generate.py (`scripts/generate deploy`): the PrometheusRule and the dashboards
ConfigMap are exactly alerts/ and dashboards/, and the committed files are what the generator
writes now. The ConfigMap is rendered by kustomize from dashboards/kustomization.yaml over the
dashboards' one committed copy."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import run_generate

from .conftest import KUBE, ROOT, find, load_docs


def _rules_in_alerts() -> list[tuple[str, str, str]]:
    """(group, alert-or-record name, expr) of every rule file in alerts/, read independently of
    the generator: every alerts/*.yaml with top-level `groups`."""
    rules = []
    for path in sorted((ROOT / "alerts").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not (isinstance(doc, dict) and "groups" in doc):
            continue
        for group in doc["groups"]:
            for rule in group["rules"]:
                rules.append((group["name"], rule.get("alert") or rule["record"], rule["expr"]))
    return rules


def test_committed_files_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_generate(capsys, "deploy", "--check")
    assert status == 0, f"run `scripts/generate`:\n{out}{err}"


def test_prometheusrule_carries_exactly_the_rules_of_alerts() -> None:
    (rule,) = load_docs(KUBE / "prometheusrule.yaml")
    ours = [(g["name"], r.get("alert") or r["record"], r["expr"])
            for g in rule["spec"]["groups"] for r in g["rules"]]
    theirs = _rules_in_alerts()
    assert theirs, "no rules found in alerts/"
    assert ours == theirs
    # Both files are in: the alerts and the recording rules the dashboards and alerts use.
    names = {name for _, name, _ in ours}
    assert "HeliosRestoreBoundBreached" in names
    assert any(":" in name for name in names)


def test_prometheusrule_groups_are_unchanged_copies() -> None:
    """labels, annotations, `for` and everything else too, not only names and expressions."""
    (rule,) = load_docs(KUBE / "prometheusrule.yaml")
    groups: list[Any] = []
    for path in sorted((ROOT / "alerts").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and "groups" in doc:
            groups.extend(doc["groups"])
    assert rule["spec"]["groups"] == groups


def _scratch_repo(tmp_path: Path) -> Path:
    """The generator's inputs and outputs in a scratch copy of the repository."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "alerts", root / "alerts", ignore=shutil.ignore_patterns("tests"))
    shutil.copytree(ROOT / "dashboards", root / "dashboards")
    (root / "deploy").mkdir()
    shutil.copytree(KUBE, root / "deploy" / "kubernetes")
    # deploy/kube-prometheus-stack is made of kps's default and helios.tmpl as well.
    for rel in ("deploy/kube-prometheus-stack", "deploy/alertmanager",
                "tests/fixtures/kube-prometheus-stack"):
        shutil.copytree(ROOT / rel, root / rel)
    return root


def _run(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    return run_generate(capsys, "deploy", *args, "--root", str(root))


def test_check_fails_when_a_rule_is_added_without_regenerating(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _scratch_repo(tmp_path)
    assert _run(capsys, root, "--check")[0] == 0
    path = root / "alerts" / "helios-alerts.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["groups"][0]["rules"].append({"alert": "HeliosSomethingNew", "expr": "vector(1)"})
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    status, out, _ = _run(capsys, root, "--check")
    assert status == 1
    assert "+      - alert: HeliosSomethingNew" in out or "HeliosSomethingNew" in out
    # ... and regenerating fixes it.
    assert _run(capsys, root)[0] == 0
    assert _run(capsys, root, "--check")[0] == 0
    (rule,) = load_docs(root / "deploy" / "kubernetes" / "prometheusrule.yaml")
    assert "HeliosSomethingNew" in {r.get("alert") for g in rule["spec"]["groups"] for r in g["rules"]}


def test_check_fails_when_a_dashboard_is_added_without_regenerating(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _scratch_repo(tmp_path)
    (root / "dashboards" / "zz-new.json").write_text('{"title": "new"}\n', encoding="utf-8")
    assert _run(capsys, root, "--check")[0] == 1
    assert _run(capsys, root)[0] == 0
    (doc,) = load_docs(root / "dashboards" / "kustomization.yaml")
    (generator,) = doc["configMapGenerator"]
    assert "zz-new.json" in generator["files"]


def test_duplicate_group_names_are_refused(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = _scratch_repo(tmp_path)
    src = root / "alerts" / "helios-alerts.yaml"
    shutil.copy(src, root / "alerts" / "helios-copy.yaml")
    status, _, err = _run(capsys, root, "--check")
    assert status == 2
    assert "is in both" in err


def test_dashboards_configmap_holds_every_dashboard_verbatim(objects: list[dict[str, Any]]) -> None:
    """`kubectl kustomize deploy/kubernetes` makes the ConfigMap of dashboards/*.json byte for
    byte, under its fixed name, in the example's namespace."""
    cm = find(objects, "ConfigMap", "helios-exporter-dashboards")
    files = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "dashboards").glob("*.json")}
    assert files and cm.get("data", {}) == files
    for name, text in files.items():
        json.loads(text)  # a dashboard that is not JSON would only fail inside Grafana
        assert name.endswith(".json")
    assert len(yaml.safe_dump(cm).encode()) < 1024 * 1024, "a ConfigMap holds at most 1 MiB"
    # Client-side `kubectl apply` copies the object into an annotation limited to 256 KiB;
    # past that only `kubectl apply --server-side` works (docs/deploy.md): split it before.
    assert len(json.dumps(cm)) < 256 * 1024, "split the dashboards ConfigMap"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Helios"}
    assert cm["metadata"]["namespace"] == "helios"


def _repository_files(suffixes: tuple[str, ...]) -> list[str]:
    """The repository's files ending in `suffixes`, outside tests/ and hidden folders."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and Path(folder, d) != ROOT / "tests"]
        found += [str(Path(folder, n).relative_to(ROOT)) for n in files if n.endswith(suffixes)]
    return found


def test_no_second_copy_of_the_dashboards_is_committed() -> None:
    """dashboards/*.json is the one copy: neither the mixin nor deploy/ holds the JSON again."""
    names = {p.name for p in (ROOT / "dashboards").glob("*.json")}
    assert names
    tracked = _repository_files((".json", ".yaml"))
    copies = [rel for rel in tracked if Path(rel).name in names and Path(rel).parent != Path("dashboards")]
    assert copies == []
    configmaps = [rel for rel in tracked if rel.startswith("deploy/")
                  and '"__inputs"' in (ROOT / rel).read_text(encoding="utf-8")]
    assert configmaps == [], "a dashboard's JSON is held in a manifest again"
