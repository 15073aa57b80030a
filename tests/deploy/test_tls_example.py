"""deploy/kubernetes-tls: the example engine with TLS and basic auth on its sidecar, rendered with
`kubectl kustomize`. It differs from deploy/kubernetes only by what its kustomization says; the
web configuration it mounts loads in the exporter with the certificate it names; the PodMonitor
trusts that certificate's CA and name and sends the password whose hash the sidecar holds.
(A real Prometheus scraping a real sidecar with these settings: tests/e2e/test_tls_e2e.py.)"""

from __future__ import annotations

import copy
import secrets
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml

from exporter import placeholders
from exporter.web.webconfig import WebConfigError, load
from tests.process_guard import process_fixture
from tools.pki import CA

from .conftest import KUBE, find, kustomize
from .sidecar_checks import KUBE_VERSIONS, SIDECAR, check_sidecar, pod_spec, validate_all
from .tls_example import TLS, TLS_MOUNT, WEB_MOUNT, example_settings, materialize, secret_data

NEW_KINDS = {("Secret", "helios-exporter-web"), ("Secret", "helios-exporter-scrape"),
             ("Certificate", "helios-exporter-tls")}


@process_fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return kustomize(TLS)


def test_the_overlay_changes_only_what_it_says(rendered: list[dict[str, Any]]) -> None:
    base = kustomize(KUBE)
    overlay = copy.deepcopy(rendered)
    assert {(o["kind"], o["metadata"]["name"]) for o in overlay} - {
        (o["kind"], o["metadata"]["name"]) for o in base} == NEW_KINDS
    namespaces = {o["metadata"].get("namespace") for o in overlay if o["kind"] != "Namespace"}
    assert namespaces == {find(base, "Namespace")["metadata"]["name"]}  # new objects included
    overlay = [o for o in overlay if (o["kind"], o["metadata"]["name"]) not in NEW_KINDS]
    pod = pod_spec(find(overlay, "Deployment", "helios-engine-a"))
    sidecar = pod["containers"][-1]
    assert sidecar["name"] == SIDECAR
    sidecar["env"] = [e for e in sidecar["env"] if e["name"] != "HELIOS_EXPORTER_WEB_CONFIG_FILE"]
    sidecar["volumeMounts"] = [m for m in sidecar["volumeMounts"]
                               if m["mountPath"] not in (WEB_MOUNT, TLS_MOUNT)]
    for probe in ("startupProbe", "livenessProbe"):
        assert sidecar[probe]["httpGet"].pop("scheme") == "HTTPS"
    pod["volumes"] = [v for v in pod["volumes"]
                      if v["name"] not in ("helios-exporter-web", "helios-exporter-tls")]
    endpoint = find(overlay, "PodMonitor", "helios-exporter")["spec"]["podMetricsEndpoints"][0]
    assert endpoint.pop("scheme") == "https"
    endpoint["scheme"] = "http"
    del endpoint["tlsConfig"], endpoint["basicAuth"]
    assert overlay == base


def test_the_sidecar_serves_tls_with_the_mounted_configuration(
        rendered: list[dict[str, Any]], serve_flags: set[str], tmp_path: Path) -> None:
    workload = find(rendered, "Deployment", "helios-engine-a")
    env = check_sidecar(rendered, workload, serve_flags, tmp_path, probe_scheme="HTTPS")
    config_file = Path(env["HELIOS_EXPORTER_WEB_CONFIG_FILE"])
    sidecar = pod_spec(workload)["containers"][-1]
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
    settings = example_settings(rendered)
    web, tls = mounts[str(config_file.parent)], mounts[TLS_MOUNT]
    assert web["readOnly"] is True and tls["readOnly"] is True
    assert volumes[web["name"]]["secret"]["secretName"] == "helios-exporter-web"
    assert volumes[tls["name"]]["secret"]["secretName"] == settings["tls_secret"]
    assert config_file.name in secret_data(find(rendered, "Secret", "helios-exporter-web"))
    # As shipped, the web configuration holds the hash of the placeholder password Prometheus
    # would send: the sidecar refuses to start with it.
    shipped = yaml.safe_load(settings["web_config"])["basic_auth_users"][settings["username"]]
    assert settings["password"] == placeholders.SCRAPE_PASSWORD
    assert bcrypt.checkpw(settings["password"].encode(), shipped.encode())
    ca = CA(tmp_path / "pki")
    with pytest.raises(WebConfigError, match="placeholder password"):
        load(materialize(settings, tmp_path / "shipped", ca))
    # With a password of one's own (and its hash) it loads, with a certificate as cert-manager
    # would write it.
    password = secrets.token_urlsafe(24)
    config, tls_settings = load(materialize(settings, tmp_path / "pod", ca, password))
    assert tls_settings is not None and config.tls is not None
    assert config.tls.cert_file is not None and str(config.tls.cert_file).endswith("tls/tls.crt")
    assert bcrypt.checkpw(password.encode(), config.users[settings["username"]])


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_core_objects_pass_strict_schema_validation(rendered: list[dict[str, Any]],
                                                    version: str) -> None:
    core = [o for o in rendered if o["kind"] != "Certificate"]  # cert-manager's CRD
    assert validate_all(core, version) == []


def test_the_podmonitor_trusts_the_certificate_and_sends_the_password(
        rendered: list[dict[str, Any]]) -> None:
    settings = example_settings(rendered)
    endpoint = settings["endpoint"]
    assert endpoint["scheme"] == "https"
    tls = endpoint["tlsConfig"]
    assert tls["ca"]["secret"] == {"name": settings["tls_secret"], "key": "ca.crt"}
    assert tls["serverName"] in settings["dns_names"]
    assert "insecureSkipVerify" not in tls
    scrape = find(rendered, "Secret", endpoint["basicAuth"]["password"]["name"])
    assert scrape["type"] == "kubernetes.io/basic-auth"
    assert scrape["metadata"]["namespace"] == find(rendered, "PodMonitor")["metadata"]["namespace"]
