"""What every pod with the injected sidecar must satisfy, whoever wrote the workload: used on the
example (deploy/kubernetes) and on the injection fixtures (tests/fixtures/kubernetes/injection)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
from kubernetes_validate.utils import latest_version

from exporter import config as cfg

from . import crd_schemas
from .conftest import ROOT, check_serve_config, find, sidecar_environment

SIDECAR = "helios-exporter"
METRICS_PORT = "helios-metrics"
INJECT_LABEL = "helios-exporter.io/inject"
INJECTED_LABEL = "helios-exporter.io/injected"
STATE_VOLUME = "helios-exporter-state"

# Oldest Kubernetes we claim (features used: seccompProfile, fsGroupChangePolicy, named ports in
# NetworkPolicy, kubernetes.io/metadata.name) and the newest schemas kubernetes-validate ships.
KUBE_VERSIONS = ("1.29", latest_version())
CRD_KINDS = {"PodMonitor", "PrometheusRule"}


def validate_all(objects: list[dict[str, Any]], version: str) -> list[str]:
    """Strict schema errors of every core object and of every Prometheus Operator object (its
    pinned CRD schema, tests/deploy/crd_schemas.py), as 'Kind/name: path: message'."""
    errors = []
    for obj in objects:
        if obj["kind"] in crd_schemas.KINDS:
            errors += crd_schemas.validate(obj)
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {path}: {exc.message}")
    return errors


def default_port() -> int:
    """The sidecar's default listen port (`serve --listen`)."""
    (listen,) = [o.default for o in cfg.OPTIONS if o.flag == "--listen"]
    return int(str(listen).rpartition(":")[2])


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def sidecar_of(workload: dict[str, Any]) -> dict[str, Any]:
    hits = [c for c in pod_spec(workload)["containers"] if c["name"] == SIDECAR]
    assert len(hits) == 1, f"{workload['metadata']['name']}: {len(hits)} sidecar containers"
    return hits[0]


def volume(workload: dict[str, Any], name: str) -> dict[str, Any]:
    hits = [v for v in pod_spec(workload).get("volumes", []) if v["name"] == name]
    assert len(hits) == 1, f"{workload['metadata']['name']}: volume {name}"
    return hits[0]


def check_sidecar(objects: list[dict[str, Any]], workload: dict[str, Any], serve_flags: set[str],
                  scratch: Path, probe_scheme: str | None = None) -> dict[str, str]:
    """Assert the sidecar of `workload` is complete and safe; return its environment.
    `probe_scheme`: HTTPS where the sidecar serves TLS (deploy/kubernetes-tls)."""
    name = workload["metadata"]["name"]
    pod = pod_spec(workload)
    sidecar = sidecar_of(workload)
    # Appended: the engine's containers keep their places (kubectl's default container is the
    # first one unless the pod names another).
    assert pod["containers"][-1] is sidecar, name
    assert pod["shareProcessNamespace"] is True, name
    assert workload["spec"]["template"]["metadata"]["labels"][INJECTED_LABEL] == "true", name

    sc = sidecar["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == sc["runAsGroup"] == 10001, name
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, name
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc.get("privileged", False) is False, name
    assert sc["seccompProfile"]["type"] == "RuntimeDefault", name
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    users = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] == str(sc["runAsUser"]), "the image's USER"

    # Probes: restart a hung sidecar; no readiness probe, which would gate the engine's traffic.
    probe = {"path": "/healthz", "port": METRICS_PORT}
    if probe_scheme is not None:
        probe["scheme"] = probe_scheme
    assert sidecar["livenessProbe"]["httpGet"] == probe
    assert sidecar["startupProbe"]["httpGet"] == probe
    assert "readinessProbe" not in sidecar, name

    resources = sidecar["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) <= set(resources["limits"]), name
    assert not any("nvidia.com" in k for k in resources["limits"]), "no GPUs for the sidecar"

    # Its configuration: real flags, accepted by the exporter's own loader.
    assert "command" not in sidecar, "keep the image's ENTRYPOINT (helios-exporter)"
    env = sidecar_environment(objects, sidecar)
    check_serve_config(list(sidecar["args"]), env, serve_flags, scratch)
    url = urlsplit(env["HELIOS_EXPORTER_ENGINE_URL"])
    assert url.hostname in ("127.0.0.1", "localhost"), "same pod: the engine is on loopback"
    assert env["HELIOS_EXPORTER_ENGINE_PROCESS_NAME"] or env.get("HELIOS_EXPORTER_ENGINE_PID_FILE")
    ports = [p for c in pod["containers"] for p in c.get("ports", [])
             if p.get("name") == METRICS_PORT]
    assert len(ports) == 1, f"{name}: port names are unique in a pod"
    listen = int(env["HELIOS_EXPORTER_LISTEN"].rpartition(":")[2])
    assert listen == ports[0]["containerPort"] == default_port()

    # State on its volume (the root filesystem is read-only), writable.
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    state = mounts[env["HELIOS_EXPORTER_STATE_DIR"]]
    assert state["name"] == STATE_VOLUME and not state.get("readOnly"), name
    assert "/tmp" in mounts, "a writable /tmp beside the read-only root"

    # The events token: a read-only file from the Secret, mounted in the sidecar only.
    token = Path(env["HELIOS_EXPORTER_EVENTS_TOKEN_FILE"])
    mount = mounts[str(token.parent)]
    assert mount["readOnly"] is True, name
    secret_ref = volume(workload, mount["name"])["secret"]
    item = next(i for i in secret_ref["items"] if i["path"] == token.name)
    secret = find(objects, "Secret", secret_ref["secretName"])
    assert item["key"] in secret.get("stringData", {}) | secret.get("data", {})
    assert secret_ref["defaultMode"] & 0o222 == 0, "the token file is read-only"
    others = [c["name"] for c in [*pod["containers"], *pod.get("initContainers", [])]
              if c is not sidecar and any(m["name"] == mount["name"] for m in c.get("volumeMounts", []))]
    assert others == [], f"only the sidecar mounts the token: {others}"
    return env


def state_claim(workload: dict[str, Any]) -> dict[str, Any] | None:
    """Where the sidecar's state lives beyond the pod: the StatefulSet's claim template (the
    controller mounts it in place of the pod volume of the same name) or the Deployment's
    claim; None for an emptyDir, which dies with the pod."""
    templates = {t["metadata"]["name"]: t for t in workload["spec"].get("volumeClaimTemplates", [])}
    if workload["kind"] == "StatefulSet" and STATE_VOLUME in templates:
        return templates[STATE_VOLUME]
    source = volume(workload, STATE_VOLUME)
    if "persistentVolumeClaim" in source:
        assert "emptyDir" not in source, "one source per volume"
        return source
    assert set(source) == {"name", "emptyDir"}, source
    return None
