"""deploy/kubernetes, the example: a placeholder engine Deployment with the sidecar injected by
components/sidecar, rendered with `kubectl kustomize`; schemas, the pod, and how the objects fit
together (tests/deploy/test_injection.py covers the component on workloads it never saw)."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter import config as cfg
from exporter import placeholders
from exporter.defaults import RESTORE_BOUND

from .conftest import KUBE, alert_job, find, kustomization, load_docs, pod_target, podmonitor_targets
from .sidecar_checks import (
    CRD_KINDS,
    INJECT_LABEL,
    KUBE_VERSIONS,
    METRICS_PORT,
    STATE_VOLUME,
    check_sidecar,
    default_port,
    pod_spec,
    state_claim,
    validate_all,
)

CORE_KINDS = {"Namespace", "Deployment", "Secret", "ConfigMap", "NetworkPolicy",
              "PersistentVolumeClaim"}

ENGINE = "engine"


def _id(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.fixture(scope="module")
def deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return find(objects, "Deployment")


def engine_of(deployment: dict[str, Any]) -> dict[str, Any]:
    (engine,) = [c for c in pod_spec(deployment)["containers"] if c["name"] == ENGINE]
    return engine


# ---- files and schemas --------------------------------------------------------------------------


def test_kustomization_lists_every_manifest() -> None:
    doc = kustomization()
    listed = set(doc["resources"]) | {p["path"] for p in doc.get("patches", [])}
    present = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    # The dashboards' ConfigMap comes from their folder (dashboards/kustomization.yaml).
    present |= {"../../dashboards"}
    assert listed == present, f"not listed: {present - listed}; missing: {listed - present}"
    assert doc["components"] == ["components/sidecar"]


def test_kinds_present(objects: list[dict[str, Any]]) -> None:
    assert {o["kind"] for o in objects} == CORE_KINDS | CRD_KINDS


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_rendered_objects_validate(objects: list[dict[str, Any]], version: str) -> None:
    assert validate_all(objects, version) == []


def test_strict_validation_rejects_a_misspelt_field(deployment: dict[str, Any]) -> None:
    broken = copy.deepcopy(deployment)
    pod_spec(broken)["containers"][-1]["securityContex"] = {}
    assert validate_all([broken], KUBE_VERSIONS[-1]) != []


def test_namespace_and_labels(objects: list[dict[str, Any]], deployment: dict[str, Any]) -> None:
    namespace = kustomization()["namespace"]
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == namespace, _id(obj)
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "helios", _id(obj)
    # Neither the part-of label nor the injection touched the (immutable) selector.
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "helios-engine", "app.kubernetes.io/instance": "helios-engine-a"}


def test_documents_parse_one_object_per_file() -> None:
    for path in KUBE.glob("*.yaml"):
        assert len(load_docs(path)) == 1, path.name


# ---- the pod ------------------------------------------------------------------------------------


def test_the_engine_file_has_no_sidecar_and_the_rendered_pod_has_one(
        objects: list[dict[str, Any]], deployment: dict[str, Any], serve_flags: set[str],
        tmp_path: Path) -> None:
    (source,) = load_docs(KUBE / "deployment.yaml")
    assert source["metadata"]["labels"][INJECT_LABEL] == "true"
    assert [c["name"] for c in pod_spec(source)["containers"]] == [ENGINE]
    env = check_sidecar(objects, deployment, serve_flags, tmp_path)
    assert env["HELIOS_EXPORTER_ENGINE_URL"] == "http://127.0.0.1:8000"
    http = [p["containerPort"] for p in engine_of(deployment)["ports"] if p["name"] == "http"]
    assert http == [8000]
    assert pod_spec(deployment)["containers"][0] == pod_spec(source)["containers"][0]


def test_state_on_the_persistent_claim(objects: list[dict[str, Any]],
                                       deployment: dict[str, Any]) -> None:
    claim = state_claim(deployment)
    assert claim is not None, "an emptyDir dies with the pod (docs/deploy.md, Durable state)"
    pvc = find(objects, "PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    # A ReadWriteOnce claim and a rolling update would put two pods on one volume.
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert deployment["spec"]["replicas"] == 1
    # A fresh claim belongs to root: the pod's fsGroup makes it writable for the sidecar.
    assert pod_spec(deployment)["securityContext"]["fsGroup"] == 10001
    assert STATE_VOLUME in {v["name"] for v in pod_spec(deployment)["volumes"]}


def test_pod_security(deployment: dict[str, Any]) -> None:
    pod = pod_spec(deployment)
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    assert not pod.get("hostNetwork") and not pod.get("hostPID")


def test_engine_resources_and_probes(deployment: dict[str, Any]) -> None:
    engine = engine_of(deployment)
    assert engine["image"] == "registry.example.com/helios/engine:2.14.0"
    assert engine["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert engine["resources"]["limits"].get("memory")
    # A draining/restoring engine must not be restarted by the kubelet.
    assert "livenessProbe" not in engine


def test_pod_is_kept_through_a_node_outage(deployment: dict[str, Any]) -> None:
    tolerations = {t["key"]: t for t in pod_spec(deployment)["tolerations"]}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        # at least the default restore bound, so the retained pod is not evicted
        assert tolerations[key]["effect"] == "NoExecute"
        assert tolerations[key]["tolerationSeconds"] >= RESTORE_BOUND


# ---- PodMonitor, NetworkPolicy ------------------------------------------------------------------


def test_podmonitor_selects_the_pod(objects: list[dict[str, Any]], deployment: dict[str, Any]) -> None:
    monitor = find(objects, "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _matches(monitor["spec"]["selector"]["matchLabels"], labels)
    assert "namespaceSelector" not in monitor["spec"], "its own namespace"
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == METRICS_PORT and endpoint.get("path", "/metrics") == "/metrics"


def test_podmonitor_relabeling_with_promtool(objects: list[dict[str, Any]],
                                             deployment: dict[str, Any], promtool: str,
                                             tmp_path: Path) -> None:
    """The pod before and after a reschedule (new name, new IP) is one series:
    instance=<namespace>/<helios-exporter.io/instance>, job = the rules' job, no pod label."""
    template = deployment["spec"]["template"]
    namespace = kustomization()["namespace"]
    pods = [*pod_target(template, "helios-engine-a-7d9f-x1", "10.1.2.3", namespace),
            *pod_target(template, "helios-engine-a-7d9f-z9", "10.9.8.7", namespace)]
    labels = podmonitor_targets(promtool, find(objects, "PodMonitor"), pods, tmp_path)
    addresses = sorted(lbl.pop("__address__") for lbl in labels)
    assert addresses == [f"10.1.2.3:{default_port()}", f"10.9.8.7:{default_port()}"]
    assert labels[0] == labels[1]
    assert labels[0]["instance"] == f"{namespace}/helios-engine-a"
    assert labels[0]["job"] == alert_job()
    assert "pod" not in labels[0]


def test_networkpolicy(objects: list[dict[str, Any]], deployment: dict[str, Any]) -> None:
    policy = find(objects, "NetworkPolicy")["spec"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _matches(policy["podSelector"]["matchLabels"], pod_labels)
    assert policy["policyTypes"] == ["Ingress"]
    by_port: dict[Any, list[Any]] = {}
    for rule in policy["ingress"]:
        for port in rule["ports"]:
            by_port.setdefault(port["port"], []).append(rule.get("from"))
    metrics_rules = by_port.get(METRICS_PORT, []) + by_port.get(default_port(), [])
    assert len(metrics_rules) == 1, "exactly one rule for the sidecar port"
    peers = metrics_rules[0]
    assert peers, "the sidecar port must not be open to everyone"
    prometheus = [p for p in peers if "namespaceSelector" in p]
    tooling = [p for p in peers if "namespaceSelector" not in p]
    assert len(prometheus) == 1 and len(tooling) == 1
    # namespace AND pod selector in one peer: Prometheus pods in monitoring, not all of monitoring
    assert prometheus[0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert prometheus[0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert tooling[0]["podSelector"]["matchLabels"] == {"helios.io/restore-tooling": "true"}
    # Selecting the pod denies everything else: the engine's API must stay reachable.
    assert "http" in by_port
    named = {p["port"] for r in policy["ingress"] for p in r["ports"] if isinstance(p["port"], str)}
    declared = {p["name"] for c in pod_spec(deployment)["containers"] for p in c["ports"]}
    assert named <= declared


# ---- generated objects ------------------------------------------------------------------------


def test_prometheusrule_and_dashboards_structure(objects: list[dict[str, Any]]) -> None:
    rule = find(objects, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    for group in rule["spec"]["groups"]:
        assert group["name"] and group["rules"]
        for r in group["rules"]:
            assert ("alert" in r) != ("record" in r) and r["expr"]
    dashboards = find(objects, "ConfigMap", "helios-exporter-dashboards")
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_placeholder_secret_is_marked_and_refused(objects: list[dict[str, Any]],
                                                 tmp_path: Path) -> None:
    # The committed token is a placeholder; make that impossible to miss, and impossible to run.
    secret = find(objects, "Secret")
    token = secret["stringData"]["token"]
    assert "REPLACE" in token and token == placeholders.EVENTS_TOKEN
    assert "PLACEHOLDER" in (KUBE / "secret-events-token.yaml").read_text(encoding="utf-8")
    path = tmp_path / "token"
    path.write_text(token)
    args = argparse.Namespace(engine_url="http://127.0.0.1:8000", events_token_file=str(path))
    with pytest.raises(cfg.ConfigError, match="placeholder token of the deployment example"):
        cfg.load(args, "serve", {})


def test_component_files_parse() -> None:
    component = KUBE / "components" / "sidecar"
    doc = yaml.safe_load((component / "kustomization.yaml").read_text(encoding="utf-8"))
    assert doc["kind"] == "Component"
    referenced = {p["path"] for p in doc["patches"]} | set(doc["resources"])
    present = {p.name for p in component.glob("*.yaml")} - {"kustomization.yaml"}
    assert referenced == present
