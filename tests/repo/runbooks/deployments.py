"""What each shipped deployment really provides, read from its manifests: the `instance` label
its scrape config produces, where the sidecar's events token is mounted, the ports a person can
reach, and the Alertmanager it sends to. The runbook test holds the runbooks against these."""

from __future__ import annotations

import base64
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
import yaml

from tests.deploy.conftest import (
    COMPOSE,
    DEPLOY,
    KUBE,
    alert_job,
    find,
    kustomize,
    pod_target,
    podmonitor_targets,
)
from tests.deploy.sidecar_checks import SIDECAR, default_port

TOKEN_VARIABLE = "HELIOS_EXPORTER_EVENTS_TOKEN_FILE"
DEPLOYMENTS = ("kubernetes", "kubernetes-tls", "compose", "plain")


@dataclass(frozen=True)
class Tls:
    """What a person needs to reach a sidecar with TLS and basic auth, and where it is."""

    names: frozenset[str]                  # the certificate's DNS names and IP addresses
    ca_file: str                           # in the sidecar container: the issuer's CA
    secrets: dict[str, dict[str, str]]     # Secret -> key -> value a person may read
    username: str                          # a user of the web configuration ...
    password: str                          # ... with the password its bcrypt hash accepts


@dataclass(frozen=True)
class Deployment:
    name: str
    job: str
    instance: str                         # the example target's instance label
    token_files: dict[str, str]           # shim key ("kubectl:<container>:<path>", ...) -> why
    alertmanagers: frozenset[str]         # host:port Prometheus sends alerts to
    sidecar_port: int                     # the sidecar's port where it runs
    engine_port: int
    namespace: str | None = None
    containers: frozenset[str] = frozenset()
    pod_labels: dict[str, str] = field(default_factory=dict)
    published: dict[str, dict[int, int]] = field(default_factory=dict)  # compose: service -> ports
    compose_file: str | None = None
    tls: Tls | None = None

    @property
    def scheme(self) -> str:
        return "http" if self.tls is None else "https"


def _kube_token_file(workload: dict[str, Any]) -> str:
    """The token path of the sidecar container, checked to be a file of its mounted Secret."""
    spec = workload["spec"]["template"]["spec"]
    (sidecar,) = [c for c in spec["containers"] if c["name"] == SIDECAR]
    path = {e["name"]: e.get("value") for e in sidecar.get("env", [])}[TOKEN_VARIABLE]
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in sidecar["volumeMounts"]:
        secret = volumes[mount["name"]].get("secret")
        if secret is None or posixpath.dirname(path) != mount["mountPath"]:
            continue
        items = [i["path"] for i in secret.get("items", [])] or ["token"]
        if posixpath.basename(path) in items:
            return str(path)
    raise AssertionError(f"{TOKEN_VARIABLE}={path} is no file of a Secret mounted in {SIDECAR}")


def _secret_data(secret: dict[str, Any]) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    return data | dict(secret.get("stringData") or {})


def _tls(objects: list[dict[str, Any]], workload: dict[str, Any]) -> Tls:
    """The certificate's names, its CA as mounted in the sidecar, and the scrape user, checked
    against the web configuration the sidecar loads (its bcrypt hash accepts the password)."""
    certificate = find(objects, "Certificate")["spec"]
    spec = workload["spec"]["template"]["spec"]
    (sidecar,) = [c for c in spec["containers"] if c["name"] == SIDECAR]
    volumes = {v["name"]: v for v in spec["volumes"]}
    (ca_dir,) = [m["mountPath"] for m in sidecar["volumeMounts"]
                 if volumes[m["name"]].get("secret", {}).get("secretName") == certificate["secretName"]]
    env = {e["name"]: e.get("value") for e in sidecar.get("env", [])}
    web_file = env["HELIOS_EXPORTER_WEB_CONFIG_FILE"]
    (web_dir,) = [m for m in sidecar["volumeMounts"] if posixpath.dirname(web_file) == m["mountPath"]]
    web_secret = find(objects, "Secret", volumes[web_dir["name"]]["secret"]["secretName"])
    users = yaml.safe_load(_secret_data(web_secret)[posixpath.basename(web_file)])["basic_auth_users"]
    scrape = find(objects, "Secret", "helios-exporter-scrape")
    credentials = _secret_data(scrape)
    username, password = credentials["username"], credentials["password"]
    assert bcrypt.checkpw(password.encode(), users[username].encode()), \
        "the scrape Secret's password does not match its user's hash in the web configuration"
    return Tls(names=frozenset(certificate.get("dnsNames", []) + certificate.get("ipAddresses", [])),
               ca_file=f"{ca_dir}/ca.crt", secrets={scrape["metadata"]["name"]: credentials},
               username=username, password=password)


def kubernetes(tmp_path: Path, promtool: str, directory: Path = KUBE) -> Deployment:
    """The example (deploy/kubernetes), or an overlay of it (`directory`: deploy/kubernetes-tls)."""
    objects = kustomize(directory)
    workload = find(objects, "Deployment")
    template = workload["spec"]["template"]
    namespace = workload["metadata"]["namespace"]
    targets = podmonitor_targets(promtool, find(objects, "PodMonitor"),
                                 pod_target(template, f"{workload['metadata']['name']}-7d9f8b6c5d-x2x4z",
                                            "10.1.2.3", namespace), tmp_path)
    (target,) = targets
    ports = {p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])
             if c["name"] != SIDECAR}
    (engine_port,) = ports
    static = yaml.safe_load((DEPLOY / "prometheus" / "prometheus-kubernetes.yml").read_text())
    tls = None if directory == KUBE else _tls(objects, workload)
    return Deployment(
        name="kubernetes" if tls is None else "kubernetes-tls", job=target["job"],
        instance=target["instance"],
        token_files={f"kubectl:{SIDECAR}:{_kube_token_file(workload)}": "the Secret's mount"},
        alertmanagers=frozenset(t for am in static["alerting"]["alertmanagers"]
                                for sc in am["static_configs"] for t in sc["targets"]),
        sidecar_port=int(target["__address__"].rpartition(":")[2]), engine_port=engine_port,
        namespace=namespace, containers=frozenset(c["name"] for c in template["spec"]["containers"]),
        pod_labels=dict(template["metadata"]["labels"]), tls=tls)


def _published(service: dict[str, Any]) -> dict[int, int]:
    """container port -> host port of `127.0.0.1:HOST:CONTAINER` entries."""
    out = {}
    for entry in service.get("ports", []):
        match = re.fullmatch(r"127\.0\.0\.1:(\d+):(\d+)", str(entry))
        assert match, f"unexpected port entry {entry!r}"
        out[int(match.group(2))] = int(match.group(1))
    return out


def compose() -> Deployment:
    path = COMPOSE / "docker-compose.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    services = doc["services"]
    exporter = services["exporter"]
    token = exporter["environment"][TOKEN_VARIABLE]
    mounted = {f"/run/secrets/{s}" if isinstance(s, str) else s.get("target", f"/run/secrets/{s['source']}")
               for s in exporter.get("secrets", [])}
    assert token in mounted, f"{TOKEN_VARIABLE}={token} is not a secret of the exporter service"
    prometheus = yaml.safe_load((COMPOSE / "prometheus.yml").read_text(encoding="utf-8"))
    (job,) = [j for j in prometheus["scrape_configs"] if j["job_name"] == alert_job()]
    (instance,) = [t for sc in job["static_configs"] for t in sc["targets"]]
    listen = exporter["environment"].get("HELIOS_EXPORTER_LISTEN", f"0.0.0.0:{default_port()}")
    engine_port = int(exporter["environment"]["HELIOS_EXPORTER_ENGINE_URL"].rpartition(":")[2])
    return Deployment(
        name="compose", job=alert_job(), instance=instance,
        token_files={f"compose:exporter:{token}": "the Compose secret"},
        alertmanagers=frozenset(t for am in prometheus["alerting"]["alertmanagers"]
                                for sc in am["static_configs"] for t in sc["targets"]),
        sidecar_port=int(listen.rpartition(":")[2]), engine_port=engine_port,
        published={name: _published(s) for name, s in services.items()},
        compose_file=str(path.relative_to(DEPLOY.parent)))


def plain() -> Deployment:
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus-static.yml").read_text())
    (job,) = [j for j in prometheus["scrape_configs"] if j["job_name"] == alert_job()]
    targets = [t for sc in job["static_configs"] for t in sc["targets"]]
    return Deployment(
        name="plain", job=alert_job(), instance=targets[0], token_files={},
        alertmanagers=frozenset(t for am in prometheus["alerting"]["alertmanagers"]
                                for sc in am["static_configs"] for t in sc["targets"]),
        sidecar_port=int(targets[0].rpartition(":")[2]), engine_port=8000)
