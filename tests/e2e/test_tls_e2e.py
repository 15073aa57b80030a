"""A real Prometheus scraping the sidecar over TLS with basic auth and a client certificate, as a
ServiceMonitor / PodMonitor would configure it (docs/deploy.md), beside jobs that get each
credential wrong; then a rotated password, picked up by the sidecar without a restart."""

from __future__ import annotations

import datetime as dt
import json
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509

from tests.conftest import ROOT
from tests.deploy.conftest import kustomize
from tests.deploy.tls_example import TLS, example_settings, materialize
from tests.e2e.procs import Stack, query, wait_for
from tests.exporter.web.tlsproc import tls_sidecar
from tools.pki import CA, write_web_config

pytestmark = pytest.mark.e2e

PASSWORD = "scrape-Pa55word"
NEW_PASSWORD = "rotated-Pa55word"


def _job(name: str, target: str, *, ca: Path | None, cert: Path | None, key: Path | None,
         password_file: Path | None) -> str:
    tls = [f"ca_file: {ca}"] if ca else []
    if cert and key:
        tls += [f"cert_file: {cert}", f"key_file: {key}"]
    lines = [f"  - job_name: {name}", "    scheme: https",
             "    tls_config: {" + ", ".join(tls) + "}"]
    if password_file:
        lines.append(f"    basic_auth: {{username: prometheus, password_file: {password_file}}}")
    lines.append(f"    static_configs: [{{targets: ['{target}']}}]")
    return "\n".join(lines) + "\n"


def targets(prom: str) -> dict[str, dict[str, Any]]:
    data = httpx.get(f"{prom}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
    return {t["labels"]["job"]: t for t in data}


def test_prometheus_scrapes_over_tls_with_basic_auth_and_a_client_certificate(
        stack: Stack, tmp_path: Path) -> None:
    ca = CA(tmp_path / "pki")
    server = ca.issue("sidecar", server=True)
    expired_server = ca.issue("sidecar-expired", server=True, expired=True)
    client = ca.issue("prometheus", server=False, dns=("prometheus.monitoring.svc",), ips=())
    other_client = CA(tmp_path / "other", name="other-ca").issue("prometheus", server=False)
    web = write_web_config(tmp_path / "web.yml", server=server, users={"prometheus": PASSWORD},
                           client_auth="RequireAndVerifyClientCert", client_ca=ca.path)
    expired_web = write_web_config(tmp_path / "expired.yml", server=expired_server,
                                   users={"prometheus": PASSWORD})
    sidecar, url = tls_sidecar(stack, web, ca.path, client=client)
    # Not waited for: no verifying client can reach it (Prometheus's verdict is awaited below).
    expired_proc, plain = stack.sidecar("http://127.0.0.1:1", "--web-config-file",
                                        str(expired_web), name="sidecar-expired", wait=False)
    target = url.removeprefix("https://")
    expired_target = plain.removeprefix("http://")
    pw, new_pw, wrong = (tmp_path / "pw", tmp_path / "pw-new", tmp_path / "pw-wrong")
    pw.write_text(PASSWORD)
    new_pw.write_text(NEW_PASSWORD)
    wrong.write_text("not-the-password")
    good = {"ca": ca.path, "cert": client.cert, "key": client.key}
    jobs = (
        _job("good", target, **good, password_file=pw)
        + _job("new-password", target, **good, password_file=new_pw)
        + _job("wrong-password", target, **good, password_file=wrong)
        + _job("no-password", target, **good, password_file=None)
        + _job("no-client-cert", target, ca=ca.path, cert=None, key=None, password_file=pw)
        + _job("other-ca-client-cert", target, ca=ca.path, cert=other_client.cert,
               key=other_client.key, password_file=pw)
        + _job("untrusted-server", target, ca=None, cert=client.cert, key=client.key,
               password_file=pw)
        + _job("expired-server-cert", expired_target, ca=ca.path, cert=None, key=None,
               password_file=pw)
    )
    _, prom = stack.prometheus([], scrape_configs="scrape_configs:\n" + jobs)

    def health() -> dict[str, str]:
        return {job: t["health"] for job, t in targets(prom).items()}

    expected = {"good": "up", "new-password": "down", "wrong-password": "down",
                "no-password": "down", "no-client-cert": "down", "other-ca-client-cert": "down",
                "untrusted-server": "down", "expired-server-cert": "down"}
    # The expired sidecar was not waited for: until it listens its target is down for another
    # reason ("connection refused"), so wait for its own.
    wait_for(lambda: health() == expected
             and "expired" in targets(prom)["expired-server-cert"]["lastError"], 60,
             f"target health {expected}, the expired certificate's error", sidecar)
    errors = {job: t["lastError"] for job, t in targets(prom).items()}
    assert "401" in errors["wrong-password"] and "401" in errors["no-password"]
    assert "certificate" in errors["untrusted-server"]
    assert "expired" in errors["expired-server-cert"], errors["expired-server-cert"]
    assert errors["no-client-cert"] and errors["other-ca-client-cert"]
    # The data arrived: the sidecar's series, from the good job only.
    wait_for(lambda: query(prom, 'helios_restore_window_open{job="good"}'), 30, "series", sidecar)
    assert query(prom, 'helios_restore_window_open{job!="good"}') == []

    # Rotate the password in the web configuration: the sidecar picks it up without a restart.
    write_web_config(web, server=server, users={"prometheus": NEW_PASSWORD},
                     client_auth="RequireAndVerifyClientCert", client_ca=ca.path)
    rotated = {**expected, "good": "down", "new-password": "up"}
    wait_for(lambda: health() == rotated, 60, f"target health {rotated}", sidecar)
    assert sidecar.alive() and expired_proc.alive()
    # The sidecar counted the refusals by path, for its own alerting.
    wrong_total = ('helios_exporter_http_auth_failures_total{job="new-password",path="/metrics",'
                   'reason="wrong"}')
    wait_for(lambda: float(query(prom, wrong_total)[0]["value"][1]) > 0, 30,
             "wrong passwords counted", sidecar)
    handshakes = query(prom, 'helios_exporter_http_tls_handshake_failures_total{job="new-password"}')
    assert handshakes and float(handshakes[0]["value"][1]) > 0


def test_the_kubernetes_tls_example_as_the_operator_would_configure_prometheus(
        stack: Stack, tmp_path: Path) -> None:
    """deploy/kubernetes-tls as rendered: its web configuration in a real sidecar (with a
    certificate for its Certificate's name), and its PodMonitor endpoint turned into the scrape
    job the Prometheus Operator generates (scheme, tls_config with the CA and server name,
    basic_auth from the Secret)."""
    settings = example_settings(kustomize(TLS))
    ca = CA(tmp_path / "pki")
    # The example's password is a placeholder the sidecar refuses: one of our own, as the
    # operator sets it (the Secret's password, and its hash in the web configuration).
    settings["password"] = secrets.token_urlsafe(24)
    web = materialize(settings, tmp_path / "pod", ca, settings["password"])
    sidecar, url = tls_sidecar(stack, web, ca.path, check_hostname=False)
    endpoint = settings["endpoint"]
    tls = endpoint["tlsConfig"]
    password = tmp_path / "scrape-password"
    password.write_text(settings["password"])
    job = (f"  - job_name: helios-exporter\n"
           f"    scheme: {endpoint['scheme']}\n"
           f"    metrics_path: {endpoint['path']}\n"
           f"    tls_config: {{ca_file: {tmp_path / 'pod/etc/helios-exporter/tls/ca.crt'}, "
           f"server_name: {tls['serverName']}}}\n"
           f"    basic_auth: {{username: {settings['username']}, password_file: {password}}}\n"
           f"    static_configs: [{{targets: ['{url.removeprefix('https://')}']}}]\n")
    _, prom = stack.prometheus([], scrape_configs="scrape_configs:\n" + job)
    wait_for(lambda: query(prom, 'up{job="helios-exporter"} == 1'), 60, "the example scraped",
             sidecar)
    wait_for(lambda: query(prom, "helios_restore_window_open"), 30, "its series", sidecar)


def test_a_certificate_about_to_expire_shows_in_prometheus_the_alert_and_the_dashboard(
        stack: Stack, tmp_path: Path) -> None:
    """A server certificate that expires in two days, scraped over TLS by a real Prometheus: the
    expiry series arrives, the two alerts' expressions (as generated, without their `for:`)
    select the page and not the ticket, and the restore dashboard's Certificate expiry panel
    shows about two days left, per certificate."""
    ca = CA(tmp_path / "pki")
    server = ca.issue("sidecar", server=True, valid_for=dt.timedelta(days=2))
    web = write_web_config(tmp_path / "web.yml", server=server, users={"prometheus": PASSWORD})
    sidecar, url = tls_sidecar(stack, web, ca.path)
    pw = tmp_path / "pw"
    pw.write_text(PASSWORD)
    job = _job("helios-exporter", url.removeprefix("https://"), ca=ca.path, cert=None, key=None,
               password_file=pw)
    _, prom = stack.prometheus([], scrape_configs="scrape_configs:\n" + job)
    series = 'helios_exporter_tls_certificate_expiry_timestamp_seconds{certificate="server"}'
    (found,) = wait_for(lambda: query(prom, series), 60, "the expiry series", sidecar)
    not_after = x509.load_pem_x509_certificate(server.cert.read_bytes()).not_valid_after_utc
    assert float(found["value"][1]) == not_after.timestamp()

    rules = {r["alert"]: r["expr"] for g in yaml.safe_load(
        (ROOT / "alerts" / "helios-alerts.yaml").read_text())["groups"]
        for r in g["rules"] if "alert" in r}
    assert [r["metric"]["certificate"] for r in query(
        prom, rules["HeliosExporterCertificateExpiryImminent"])] == ["server"]
    assert query(prom, rules["HeliosExporterCertificateExpiring"]) == []

    restore = json.loads((ROOT / "dashboards" / "helios-restore.json").read_text())
    (panel,) = [p for p in restore["panels"] if p.get("title") == "Certificate expiry"]
    expr = panel["targets"][0]["expr"]
    for name, value in (("cluster", ".*"), ("job", "helios-exporter"),
                        ("instance", url.removeprefix("https://"))):
        expr = expr.replace(f"${name}", value)
    # Bounds from this test's own clock readings around the query, never from an import-time
    # NOW: the time left is the certificate's end minus Prometheus's evaluation time.
    asked = time.time()
    (left,) = query(prom, expr)
    answered = time.time()
    end = not_after.timestamp()
    assert end - answered - 5 <= float(left["value"][1]) <= end - asked + 5
