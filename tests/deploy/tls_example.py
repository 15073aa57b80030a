"""What deploy/kubernetes-tls configures, read from its rendering, and the sidecar's two mounts
materialized on disk: shared by tests/deploy/test_tls_example.py and tests/e2e/test_tls_e2e.py.

The example's scrape password is a placeholder the sidecar refuses (exporter/placeholders.py): a
test that runs the sidecar replaces it, and its hash, as the docs tell an operator to."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from tools.pki import CA, bcrypt_hash

from .conftest import DEPLOY, find

TLS = DEPLOY / "kubernetes-tls"
WEB_MOUNT, TLS_MOUNT = "/etc/helios-exporter/web", "/etc/helios-exporter/tls"


def secret_data(secret: dict[str, Any]) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
    return data | secret.get("stringData", {})


def example_settings(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    """What the example configures, as the tests (and tests/e2e) need it."""
    certificate = find(rendered, "Certificate", "helios-exporter-tls")
    (endpoint,) = find(rendered, "PodMonitor", "helios-exporter")["spec"]["podMetricsEndpoints"]
    auth = endpoint["basicAuth"]
    creds = secret_data(find(rendered, "Secret", auth["username"]["name"]))
    return {
        "web_config": secret_data(find(rendered, "Secret", "helios-exporter-web"))["web-config.yml"],
        "dns_names": certificate["spec"]["dnsNames"], "tls_secret": certificate["spec"]["secretName"],
        "endpoint": endpoint, "username": creds[auth["username"]["key"]],
        "password": creds[auth["password"]["key"]],
    }


def materialize(settings: dict[str, Any], root: Path, ca: CA, password: str | None = None) -> Path:
    """The two mounts of the sidecar under `root`, with a certificate for the example's name
    issued by `ca`; returns the web configuration file (its paths moved under `root` too).
    `password`: the scrape password to replace the placeholder's hash with (as is: None)."""
    server = ca.issue("sidecar", server=True, dns=tuple(settings["dns_names"]), ips=())
    tls = root / TLS_MOUNT.lstrip("/")
    web = root / WEB_MOUNT.lstrip("/")
    tls.mkdir(parents=True)
    web.mkdir(parents=True)
    (tls / "tls.crt").write_bytes(server.cert.read_bytes())
    (tls / "tls.key").write_bytes(server.key.read_bytes())
    (tls / "ca.crt").write_bytes(ca.path.read_bytes())
    config = web / "web-config.yml"
    text = settings["web_config"].replace(TLS_MOUNT, str(tls))
    if password is not None:
        doc = yaml.safe_load(text)
        doc["basic_auth_users"][settings["username"]] = bcrypt_hash(password)
        text = yaml.safe_dump(doc)
    config.write_text(text)
    return config
