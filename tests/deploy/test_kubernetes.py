"""deploy/kubernetes: schema validation, the sidecar's pod spec, and how the objects fit together."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from .conftest import KUBE, alert_job, check_serve_config, find, kube_objects, kustomization, load_docs

# Oldest Kubernetes we claim (features used: seccompProfile, fsGroupChangePolicy, named ports in
# NetworkPolicy, kubernetes.io/metadata.name) and the newest schemas kubernetes-validate ships.
KUBE_VERSIONS = ("1.29", latest_version())
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}
CORE_KINDS = {"Namespace", "Deployment", "Service", "Secret", "ConfigMap", "NetworkPolicy",
              "PersistentVolumeClaim"}
SIDECAR = "helios-exporter"
ENGINE = "engine"


def _id(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = find(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    hits = [c for c in pod_spec(objects)["containers"] if c["name"] == name]
    assert len(hits) == 1, f"container {name!r}"
    return hits[0]


def env_of(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


def port_number(c: dict[str, Any], name: str) -> int:
    hits = [p["containerPort"] for p in c["ports"] if p["name"] == name]
    assert len(hits) == 1, f"port {name!r} of {c['name']}"
    return int(hits[0])


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# ---- files and schemas --------------------------------------------------------------------------


def test_kustomization_lists_every_manifest() -> None:
    listed = set(kustomization()["resources"])
    present = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present, f"not listed: {present - listed}; missing: {listed - present}"


def test_kinds_present(objects: list[dict[str, Any]]) -> None:
    kinds = {o["kind"] for o in objects}
    assert kinds == CORE_KINDS | CRD_KINDS


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("obj", [o for o in kube_objects() if o["kind"] not in CRD_KINDS], ids=_id)
def test_core_objects_validate(obj: dict[str, Any], version: str) -> None:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{_id(obj)} against Kubernetes {version}: {path}: {exc.message}")


def test_strict_validation_rejects_a_misspelt_field(objects: list[dict[str, Any]]) -> None:
    deployment = copy.deepcopy(find(objects, "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][1]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSIONS[-1], strict=True)


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: `kubectl kustomize` not checked")
    result = subprocess.run([kubectl, "kustomize", str(KUBE)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def test_kustomize_build(rendered: list[dict[str, Any]], objects: list[dict[str, Any]]) -> None:
    namespace = kustomization()["namespace"]
    assert sorted(map(_id, rendered)) == sorted(map(_id, objects))
    for obj in rendered:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == namespace, _id(obj)
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "helios", _id(obj)
        if obj["kind"] not in CRD_KINDS:
            kubernetes_validate.validate(obj, KUBE_VERSIONS[-1], strict=True)
    # The part-of label must not have leaked into the (immutable) Deployment selector.
    selector = find(rendered, "Deployment")["spec"]["selector"]["matchLabels"]
    assert "app.kubernetes.io/part-of" not in selector


# ---- the pod ------------------------------------------------------------------------------------


def test_sidecar_security_context(objects: list[dict[str, Any]]) -> None:
    sc = container(objects, SIDECAR)["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 10001 and sc["runAsGroup"] == 10001  # the image's USER
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert "add" not in sc["capabilities"]
    assert sc.get("privileged", False) is False
    assert sc["seccompProfile"]["type"] == "RuntimeDefault"
    pod = pod_spec(objects)
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["securityContext"]["fsGroup"] == 10001  # PVC and token readable by the sidecar
    assert pod["automountServiceAccountToken"] is False
    assert not pod.get("hostNetwork") and not pod.get("hostPID")


def test_image_user_matches_run_as_user(objects: list[dict[str, Any]]) -> None:
    dockerfile = (KUBE.parents[1] / "Dockerfile").read_text(encoding="utf-8")
    users = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    uid = container(objects, SIDECAR)["securityContext"]["runAsUser"]
    assert users and users[-1].split(":")[0] == str(uid)


def test_shared_process_namespace_and_engine_process_name(objects: list[dict[str, Any]]) -> None:
    assert pod_spec(objects)["shareProcessNamespace"] is True
    env = env_of(container(objects, SIDECAR))
    assert env.get("HELIOS_EXPORTER_ENGINE_PROCESS_NAME") or env.get("HELIOS_EXPORTER_ENGINE_PID_FILE")


def test_sidecar_uses_only_real_flags(objects: list[dict[str, Any]], serve_flags: set[str],
                                      tmp_path: Path) -> None:
    c = container(objects, SIDECAR)
    assert "command" not in c, "keep the image's ENTRYPOINT (helios-exporter)"
    check_serve_config(list(c["args"]), env_of(c), serve_flags, tmp_path)


def test_sidecar_talks_to_the_engine_port(objects: list[dict[str, Any]]) -> None:
    sidecar, engine = container(objects, SIDECAR), container(objects, ENGINE)
    env = env_of(sidecar)
    url = urlsplit(env["HELIOS_EXPORTER_ENGINE_URL"])
    assert url.hostname in ("127.0.0.1", "localhost")  # same pod: shared network namespace
    assert url.port == port_number(engine, "http") == 8000
    listen_port = int(env["HELIOS_EXPORTER_LISTEN"].rpartition(":")[2])
    assert listen_port == port_number(sidecar, "metrics") == 9400


def test_state_dir_on_the_persistent_claim(objects: list[dict[str, Any]]) -> None:
    pod = pod_spec(objects)
    sidecar = container(objects, SIDECAR)
    state_dir = env_of(sidecar)["HELIOS_EXPORTER_STATE_DIR"]
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    assert state_dir in mounts, "the state dir must be a volume (the root filesystem is read-only)"
    assert not mounts[state_dir].get("readOnly")
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[state_dir]["name"])
    assert "persistentVolumeClaim" in volume, "an emptyDir dies with the pod (docs/deploy.md)"
    claim = find(objects, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    # A ReadWriteOnce claim and a rolling update would put two pods on one volume.
    assert find(objects, "Deployment")["spec"]["strategy"]["type"] == "Recreate"
    assert find(objects, "Deployment")["spec"]["replicas"] == 1


def test_events_token_from_secret_file(objects: list[dict[str, Any]]) -> None:
    pod = pod_spec(objects)
    sidecar = container(objects, SIDECAR)
    token_file = Path(env_of(sidecar)["HELIOS_EXPORTER_EVENTS_TOKEN_FILE"])
    mount = next(m for m in sidecar["volumeMounts"] if m["mountPath"] == str(token_file.parent))
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    secret_ref = volume["secret"]
    item = next(i for i in secret_ref["items"] if i["path"] == token_file.name)
    secret = find(objects, "Secret", secret_ref["secretName"])
    assert item["key"] in secret.get("stringData", {}) | secret.get("data", {})
    assert secret_ref["defaultMode"] & 0o007 == 0, "token file must not be world-readable"


def test_probes(objects: list[dict[str, Any]]) -> None:
    sidecar = container(objects, SIDECAR)
    assert sidecar["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert sidecar["startupProbe"]["httpGet"]["path"] == "/healthz"
    # A draining/restoring engine must not be restarted by the kubelet.
    assert "livenessProbe" not in container(objects, ENGINE)


def test_resources(objects: list[dict[str, Any]]) -> None:
    for c in pod_spec(objects)["containers"]:
        assert c["resources"]["requests"], c["name"]
        assert c["resources"]["limits"].get("memory"), c["name"]
    sidecar = container(objects, SIDECAR)["resources"]
    assert {"cpu", "memory"} <= set(sidecar["requests"]) and {"cpu", "memory"} <= set(sidecar["limits"])
    assert "nvidia.com/gpu" not in sidecar["limits"], "the sidecar must not take GPUs from the engine"
    engine = container(objects, ENGINE)
    assert engine["image"] == "registry.example.com/helios/engine:2.14.0"
    assert engine["resources"]["limits"]["nvidia.com/gpu"] == 2


def test_pod_is_kept_through_a_node_outage(objects: list[dict[str, Any]]) -> None:
    tolerations = {t["key"]: t for t in pod_spec(objects)["tolerations"]}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        # at least the default restore bound (5400 s), so the retained pod is not evicted
        assert tolerations[key]["effect"] == "NoExecute"
        assert tolerations[key]["tolerationSeconds"] >= 5400


# ---- Service, ServiceMonitor, NetworkPolicy ---------------------------------------------------


def test_service_selects_the_pods(objects: list[dict[str, Any]]) -> None:
    service = find(objects, "Service")
    labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert _matches(service["spec"]["selector"], labels)
    (port,) = service["spec"]["ports"]
    assert port["name"] == "metrics" and port["port"] == 9400 and port["targetPort"] == "metrics"
    # The pod is NotReady while the engine is down; its sidecar must still be scraped.
    assert service["spec"]["publishNotReadyAddresses"] is True


def test_servicemonitor_selects_service_and_port(objects: list[dict[str, Any]]) -> None:
    monitor, service = find(objects, "ServiceMonitor"), find(objects, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert _matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert "namespaceSelector" not in monitor["spec"] or monitor["spec"]["namespaceSelector"]
    port_names = {p["name"] for p in service["spec"]["ports"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in port_names
    assert endpoint.get("path", "/metrics") == "/metrics"
    # job = value of the Service label named by jobLabel = what every rule selects.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == alert_job()


def test_servicemonitor_relabeling_with_promtool(objects: list[dict[str, Any]], promtool: str,
                                                 tmp_path: Path) -> None:
    """The endpoint's relabelings, run by the real Prometheus relabeling behind the labels the
    Prometheus Operator sets first, give instance=<namespace>/<instance label> and no pod."""
    monitor = find(objects, "ServiceMonitor")
    pod_labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    (endpoint,) = monitor["spec"]["endpoints"]
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    user = [{keys.get(k, k): v for k, v in r.items()} for r in endpoint["relabelings"]]
    operator = [  # what the operator generates before the user's relabelings (abridged)
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"target_label": "job", "replacement": alert_job()},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
    ]
    meta = {"__meta_kubernetes_namespace": "helios", "__meta_kubernetes_pod_container_name": SIDECAR}
    meta |= {"__meta_kubernetes_pod_label_" + k.replace(".", "_").replace("/", "_").replace("-", "_"): v
             for k, v in pod_labels.items()}
    pod_name = "__meta_kubernetes_pod_name"
    targets = [  # one pod before and after a reschedule: new name, new IP
        {"targets": ["10.1.2.3:9400"], "labels": meta | {pod_name: "helios-engine-a-7d9f-x1"}},
        {"targets": ["10.9.8.7:9400"], "labels": meta | {pod_name: "helios-engine-a-7d9f-z9"}},
    ]
    (tmp_path / "targets.json").write_text(json.dumps(targets))
    sd = [{"files": [str(tmp_path / "targets.json")]}]
    job = {"job_name": "sm", "file_sd_configs": sd, "relabel_configs": operator + user}
    config = {"scrape_configs": [job]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run([promtool, "check", "service-discovery", "--timeout=2s",
                             str(tmp_path / "prometheus.yml"), "sm"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    labels = [{k: v for k, v in t["labels"].items() if not k.startswith("__")}
              for t in json.loads(result.stdout)]
    expected = f"helios/{pod_labels['app.kubernetes.io/instance']}"
    # The pod before and after a reschedule (new name, new IP) is one and the same series.
    assert labels[0] == labels[1]
    assert labels[0]["instance"] == expected
    assert "pod" not in labels[0]
    assert labels[0]["job"] == alert_job()


def test_networkpolicy(objects: list[dict[str, Any]]) -> None:
    policy = find(objects, "NetworkPolicy")["spec"]
    pod_labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert _matches(policy["podSelector"]["matchLabels"], pod_labels)
    assert policy["policyTypes"] == ["Ingress"]
    sidecar, engine = container(objects, SIDECAR), container(objects, ENGINE)
    by_port: dict[Any, list[Any]] = {}
    for rule in policy["ingress"]:
        for port in rule["ports"]:
            by_port.setdefault(port["port"], []).append(rule.get("from"))
    metrics_rules = by_port.get("metrics", []) + by_port.get(port_number(sidecar, "metrics"), [])
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
    assert "http" in by_port or port_number(engine, "http") in by_port
    named = {p["port"] for r in policy["ingress"] for p in r["ports"] if isinstance(p["port"], str)}
    declared = {p["name"] for c in (sidecar, engine) for p in c["ports"]}
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


def test_placeholder_secret_is_marked(objects: list[dict[str, Any]]) -> None:
    # The committed token is a placeholder; make that impossible to miss.
    secret = find(objects, "Secret")
    assert "REPLACE" in secret["stringData"]["token"]
    assert "PLACEHOLDER" in (KUBE / "secret-events-token.yaml").read_text(encoding="utf-8")


def test_documents_parse_one_object_per_file() -> None:
    for path in KUBE.glob("*.yaml"):
        docs = load_docs(path)
        assert len(docs) == 1, path.name
