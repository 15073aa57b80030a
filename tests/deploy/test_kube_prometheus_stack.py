"""deploy/kube-prometheus-stack: kps's default Alertmanager configuration kept as it is with the
Helios fragment merged in, the AlertmanagerConfig alternative, the objects labelled for kps's
selectors, and the Helios rules beside kps's own under promtool (tests/deploy/kps/). The real
Alertmanager and Prometheus run in tests/e2e/test_kps_e2e.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import alertmanager
from alerts.generate import load_config
from deploy import kps
from tests.helpers import missing

from . import crd_schemas
from .conftest import DEPLOY, ROOT, find, kustomize, load_docs

pytestmark = pytest.mark.e2e  # amtool, promtool and kustomize

KPS_DIR = DEPLOY / "kube-prometheus-stack"
KPS_DEFAULT = ROOT / "tests" / "fixtures" / "kube-prometheus-stack" / "alertmanager-config.yaml"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing(f"{name} not installed")
    return path


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((KPS_DIR / "values.yaml").read_text(encoding="utf-8"))
    return doc


@pytest.fixture(scope="module")
def merged_file(values: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """values.yaml's Alertmanager configuration as the chart writes it, its templates beside it."""
    tmp = tmp_path_factory.mktemp("kps-am")
    config = values["alertmanager"]["config"]
    for name, text in values["alertmanager"]["templateFiles"].items():
        (tmp / name).write_text(text, encoding="utf-8")
    config = {**config, "templates": [str(tmp / "*.tmpl")]}  # /etc/alertmanager/config in kps
    path = tmp / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def test_kps_defaults_are_kept_as_they_are(values: dict[str, Any]) -> None:
    default = yaml.safe_load(KPS_DEFAULT.read_text(encoding="utf-8"))
    config = values["alertmanager"]["config"]
    fragment = alertmanager.fragment(load_config())
    assert config["global"] == default["global"]
    assert config["templates"] == default["templates"]
    n = len(default["inhibit_rules"])
    assert n == 4 and config["inhibit_rules"][:n] == default["inhibit_rules"]
    assert config["inhibit_rules"][n:] == fragment["inhibit_rules"]
    route = dict(config["route"])
    routes = route.pop("routes")
    assert route == {k: v for k, v in default["route"].items() if k != "routes"}
    assert routes == [*default["route"]["routes"], fragment["route"]]
    assert config["receivers"] == [*default["receivers"], *fragment["receivers"]]
    assert values["alertmanager"]["templateFiles"] == {
        "helios.tmpl": (DEPLOY / "alertmanager" / "helios.tmpl").read_text(encoding="utf-8")}


def test_merged_config_loads_in_amtool(merged_file: Path) -> None:
    result = subprocess.run([_tool("amtool"), "check-config", str(merged_file)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Found:\n - global config\n - route\n - 8 inhibit rules\n - 4 receivers" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        # kps's own: Watchdog and everything not Helios go where kps sends them.
        (["alertname=Watchdog", "severity=none"], "null"),
        (["alertname=KubePodCrashLooping", "severity=critical", "namespace=helios"], "null"),
        (["alertname=TargetDown", "severity=warning", "namespace=helios", "job=helios-exporter"],
         "null"),
        # Helios's: by name, as in deploy/alertmanager/alertmanager.yml.
        (["alertname=HeliosRestoreBoundBreached", "severity=critical"], "helios-page"),
        (["alertname=HeliosRestoreWindowClosed", "severity=notice"], "helios-page"),
        (["alertname=HeliosRestoreWindowForgotten", "severity=notice"], "helios-page"),
        (["alertname=HeliosGpuLost", "severity=critical"], "helios-page"),
        (["alertname=HeliosExporterDown", "severity=warning"], "helios-ticket"),
        (["alertname=HeliosRestoreWindowOpen", "severity=info"], "helios-null"),
        (["alertname=HeliosRestoreWindowPodInhibitor", "severity=info"], "helios-null"),
        # The offload evidence: info, never routed (kps's InfoInhibitor mutes nothing it needs).
        (["alertname=HeliosOffloadCacheInert", "severity=info", "namespace=helios"], "helios-null"),
        (["alertname=HeliosOffloadStoresDropped", "severity=warning", "namespace=helios"],
         "helios-ticket"),
    ],
)
def test_routes(merged_file: Path, labels: list[str], receiver: str) -> None:
    result = subprocess.run(
        [_tool("amtool"), "config", "routes", "test", "--config.file", str(merged_file), *labels],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_the_standalone_config_has_the_fragments_routes_and_inhibitions() -> None:
    """One home for the Helios routing: alerts/alertmanager.py; the hand-written standalone
    deploy/alertmanager/alertmanager.yml holds the same."""
    fragment = alertmanager.fragment(load_config())
    main = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text(encoding="utf-8"))
    assert main["route"]["routes"] == fragment["route"]["routes"]
    assert main["route"]["group_by"] == fragment["route"]["group_by"]
    assert main["inhibit_rules"] == alertmanager.helios_inhibit_rules(load_config())
    assert main["receivers"] == fragment["receivers"]


def _amc_as_alertmanager(spec: dict[str, Any]) -> dict[str, Any]:
    """The AlertmanagerConfig spec back in Alertmanager's keys (no operator rewriting)."""
    def matchers(ms: list[dict[str, str]]) -> list[str]:
        return [f'{m["name"]}{m["matchType"]}"{m["value"]}"' for m in ms]

    def route(r: dict[str, Any]) -> dict[str, Any]:
        back = {snake: r[camel] for snake, camel in kps._ROUTE_KEYS.items() if camel in r}
        back["matchers"] = matchers(r["matchers"])
        if "routes" in r:
            back["routes"] = [route(child) for child in r["routes"]]
        return back

    return {
        "route": route(spec["route"]),
        "inhibit_rules": [{"source_matchers": matchers(i["sourceMatch"]),
                           "target_matchers": matchers(i["targetMatch"]),
                           "equal": i["equal"]} for i in spec["inhibitRules"]],
        "receivers": [r["name"] for r in spec["receivers"]],
    }


def test_alertmanagerconfig_is_the_fragment() -> None:
    (amc,) = load_docs(KPS_DIR / "alertmanagerconfig.yaml")
    fragment = alertmanager.fragment(load_config())
    back = _amc_as_alertmanager(amc["spec"])
    strip = {"routes", "matchers", *kps._ROUTE_KEYS}
    assert back["route"] == {k: v for k, v in fragment["route"].items() if k in strip}
    assert back["inhibit_rules"] == fragment["inhibit_rules"]
    assert back["receivers"] == [r["name"] for r in fragment["receivers"]]
    # Webhooks only: an AlertmanagerConfig takes a Slack URL from a Secret, not inline.
    for receiver in amc["spec"]["receivers"]:
        assert set(receiver) <= {"name", "webhookConfigs"}
    assert crd_schemas.validate(amc) == []


def test_kps_overlay_labels_what_kps_selects() -> None:
    rendered = kustomize(KPS_DIR)
    monitors = [o for o in rendered if o["kind"] == "PodMonitor"]
    rules = [o for o in rendered if o["kind"] == "PrometheusRule"]
    assert len(monitors) == 1 and len(rules) == 2
    for obj in monitors + rules:
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack", obj["metadata"]
        assert obj["metadata"]["namespace"] == "helios"
        assert crd_schemas.validate(obj) == []
    kps_rule = find(rendered, "PrometheusRule", "helios-exporter-kps-rules")
    assert kps_rule["spec"] == yaml.safe_load((KPS_DIR / "helios-kps.rules.yaml").read_text())
    # Everything else is the example unchanged.
    assert {o["kind"] for o in rendered} == {o["kind"] for o in kustomize(DEPLOY / "kubernetes")}


def test_promtool_with_kps_rules_beside_the_shipped_ones() -> None:
    result = subprocess.run(
        [_tool("promtool"), "test", "rules", str(ROOT / "tests/deploy/kps/coexistence.yaml")],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_kps_rule_file_checks(tmp_path: Path) -> None:
    result = subprocess.run(
        [_tool("promtool"), "check", "rules", str(KPS_DIR / "helios-kps.rules.yaml")],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
