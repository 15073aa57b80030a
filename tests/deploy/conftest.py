"""Shared fixtures for the deployment tests: paths, manifests, the sidecar's real flags."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.generate import load_config
from tests.deploy.dockerfile import context, dockerfile  # noqa: F401  (fixtures)
from tests.helpers import missing
from tests.process_guard import process_fixture

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"
COMPONENT = KUBE / "components" / "sidecar"
INJECTION = ROOT / "tests" / "fixtures" / "kubernetes" / "injection"
COMPOSE = DEPLOY / "compose"
ENV_PREFIX = "HELIOS_EXPORTER_"


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def kustomization() -> dict[str, Any]:
    doc = yaml.safe_load((KUBE / "kustomization.yaml").read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def kube_objects() -> list[dict[str, Any]]:
    """Every object of every resource file listed in kustomization.yaml, in order."""
    objects: list[dict[str, Any]] = []
    for rel in kustomization()["resources"]:
        objects.extend(load_docs(KUBE / rel))
    return objects


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIR`: the objects as the cluster would get them."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        missing("kubectl not installed: `kubectl kustomize` renders the manifests")
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def pod_meta_labels(labels: dict[str, str]) -> dict[str, str]:
    """Pod labels as Kubernetes service discovery names them (__meta_kubernetes_pod_label_*)."""
    return {"__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k): v
            for k, v in labels.items()}


def podmonitor_targets(promtool: str, monitor: dict[str, Any], pods: list[dict[str, Any]],
                       tmp_path: Path) -> list[dict[str, str]]:
    """Final labels of the targets `monitor` (a PodMonitor with one endpoint) makes of `pods`
    (file_sd target groups carrying __meta_kubernetes_* labels), relabeled by the real Prometheus
    code (`promtool check service-discovery`) behind an abridged version of what the Prometheus
    Operator generates first: keep the selected pods and the endpoint's port, then namespace,
    pod, container, job and endpoint labels. Dropped targets are left out."""
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    user = [{keys.get(k, k): v for k, v in r.items()} for r in endpoint.get("relabelings", [])]
    operator: list[dict[str, Any]] = [
        {"source_labels": [next(iter(pod_meta_labels({k: v})))], "regex": v, "action": "keep"}
        for k, v in monitor["spec"]["selector"]["matchLabels"].items()]
    operator += [
        {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": endpoint["port"],
         "action": "keep"},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"target_label": "job",
         "replacement": f"{monitor['metadata'].get('namespace', 'default')}/{monitor['metadata']['name']}"},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
    ]
    (tmp_path / "targets.json").write_text(json.dumps(pods), encoding="utf-8")
    job = {"job_name": "podmonitor", "metrics_path": endpoint.get("path", "/metrics"),
           "file_sd_configs": [{"files": [str(tmp_path / "targets.json")]}],
           "relabel_configs": operator + user}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({"scrape_configs": [job]}),
                                             encoding="utf-8")
    result = subprocess.run([promtool, "check", "service-discovery", "--timeout=2s",
                             str(tmp_path / "prometheus.yml"), "podmonitor"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [{k: v for k, v in t["labels"].items() if not k.startswith("__") or k == "__address__"}
            for t in json.loads(result.stdout) if t["labels"]]


def pod_target(pod: dict[str, Any], name: str, ip: str, namespace: str) -> list[dict[str, Any]]:
    """File-SD target groups Kubernetes pod discovery makes of a pod template: one per
    container port, with the pod's labels."""
    groups = []
    for c in pod["spec"]["containers"]:
        for port in c.get("ports", []):
            labels = {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_pod_name": name,
                      "__meta_kubernetes_pod_ip": ip,
                      "__meta_kubernetes_pod_container_name": c["name"],
                      "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                      "__meta_kubernetes_pod_container_port_number": str(port["containerPort"])}
            labels |= pod_meta_labels(pod["metadata"].get("labels", {}))
            groups.append({"targets": [f"{ip}:{port['containerPort']}"], "labels": labels})
    return groups


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


def help_flags(*command: str) -> set[str]:
    """The long flags `python -m commands <command> --help` prints."""
    result = subprocess.run([sys.executable, "-m", "commands", *command, "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", result.stdout))
    flags.discard("--help")
    assert flags, result.stdout
    return flags


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.removeprefix("--").replace("-", "_").upper()


@process_fixture(scope="session")
def serve_flags() -> set[str]:
    return help_flags("serve")


@process_fixture(scope="session")
def simulate_flags() -> set[str]:
    return help_flags("simulate")


@process_fixture(scope="session")
def objects() -> list[dict[str, Any]]:
    """The example (deploy/kubernetes) as `kubectl kustomize` renders it."""
    return kustomize(KUBE)


def sidecar_environment(objects: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet builds it: `envFrom` ConfigMaps (found in
    `objects`), then `env` values, which win."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        name = source["configMapRef"]["name"]
        env |= find(objects, "ConfigMap", name)["data"]
    env |= {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return env


@process_fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing("promtool not installed (Debian package prometheus)")
    return path


def alert_job() -> str:
    """The job the rules select, from alerts/config.yaml `selector: 'job="..."'`."""
    selector = load_config(ROOT / "alerts" / "config.yaml").selector
    match = re.search(r'\bjob="([^"]+)"', selector)
    assert match, selector
    return match.group(1)


def check_serve_config(args: list[str], env: dict[str, str], serve_flags: set[str],
                       scratch: Path) -> None:
    """`args` + `env` is a sidecar command line the exporter accepts: the command is `serve`,
    every flag and every HELIOS_EXPORTER_* variable names a real `serve` flag, and the values
    pass the exporter's own configuration loader. Files (`*_FILE`), which exist only inside the
    container, are replaced by a readable file in `scratch` for the loader (an empty web
    configuration for the web-config file, which must be YAML; tests/deploy/test_tls_example.py
    checks the real one)."""
    from exporter import config as cfg

    assert args[:1] == ["serve"], args
    flags = {a.split("=", 1)[0] for a in args[1:] if a.startswith("--")}
    assert flags <= serve_flags, f"unknown serve flags: {sorted(flags - serve_flags)}"
    known_env = {env_name(f) for f in serve_flags}
    ours = {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}
    assert set(ours) <= known_env, f"unknown variables: {sorted(set(ours) - known_env)}"
    stand_in = scratch / "stand-in-file"
    stand_in.write_text("stand-in\n")
    empty_web = scratch / "stand-in-web-config.yml"
    empty_web.write_text("")
    ours = {k: str(empty_web if k == env_name("--web-config-file") else stand_in)
            if k.endswith("_FILE") else v for k, v in ours.items()}
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, "serve")
    try:
        cfg.load(parser.parse_args(args[1:]), "serve", ours)
    except cfg.ConfigError as exc:
        pytest.fail(f"the exporter rejects this configuration: {exc.errors}")
