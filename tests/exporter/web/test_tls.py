"""`serve --web-config-file`: TLS on every path, basic auth, client certificates and a changed
configuration picked up without a restart, against the real process with real TLS clients.
(A real Prometheus scraping it: tests/e2e/test_tls_e2e.py.)"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import ssl
import time
from pathlib import Path

import httpx
import pytest

from tests.exporter.web.tlsproc import client_context, logged_errors, tls_sidecar
from tools.harness import Procs, families, sample, wait_until
from tools.pki import CA, Issued, write_web_config

PASSWORD = "scrape-Pa55word"
AUTH = ("prometheus", PASSWORD)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("pki")
    ca, other = CA(folder / "ca"), CA(folder / "other", name="someone-elses-ca")
    return {
        "ca": ca,
        "server": ca.issue("server", server=True),
        "server_expired": ca.issue("server-expired", server=True, expired=True),
        "client": ca.issue("prometheus", server=False, dns=("prometheus.monitoring.svc",), ips=()),
        "client_other_san": ca.issue("intruder", server=False, dns=("intruder.example",), ips=()),
        "client_expired": ca.issue("prometheus-expired", server=False, expired=True,
                                   dns=("prometheus.monitoring.svc",), ips=()),
        "client_other_ca": other.issue("prometheus-elsewhere", server=False,
                                       dns=("prometheus.monitoring.svc",), ips=()),
    }


def _ca(pki: dict[str, object]) -> CA:
    ca = pki["ca"]
    assert isinstance(ca, CA)
    return ca


def _cert(pki: dict[str, object], name: str) -> Issued:
    cert = pki[name]
    assert isinstance(cert, Issued)
    return cert


def get(url: str, ca: Path | None, client: Issued | None = None, **kw: object) -> httpx.Response:
    return httpx.get(url, verify=client_context(ca, client), timeout=5, **kw)  # type: ignore[arg-type]


def metrics_of(url: str, ca: Path, client: Issued | None = None) -> dict[str, object]:
    time.sleep(0.7)  # two poll cycles: /metrics is rendered once per cycle
    return families(get(url + "/metrics", ca, client, auth=AUTH).content)  # type: ignore[return-value]


def test_tls_on_every_path_and_basic_auth(procs: Procs, tmp_path: Path,
                                          pki: dict[str, object]) -> None:
    ca = _ca(pki).path
    web = write_web_config(tmp_path / "web.yml", server=_cert(pki, "server"),
                           users={"prometheus": PASSWORD})
    proc, url = tls_sidecar(procs, web, ca)
    assert get(url + "/metrics", ca).status_code == 401
    assert get(url + "/metrics", ca, auth=("prometheus", "wrong")).status_code == 401
    assert get(url + "/metrics", ca, auth=("nobody", PASSWORD)).status_code == 401
    ok = get(url + "/metrics", ca, auth=AUTH)
    assert ok.status_code == 200 and b"helios_restore_window_open" in ok.content
    for path in ("/status", "/"):
        assert get(url + path, ca).status_code == 401
    assert get(url + "/status", ca, auth=AUTH).status_code == 200
    for probe in ("/healthz", "/readyz"):
        assert get(url + probe, ca).status_code == 200  # kubelet probes carry no password
    # gzip over TLS, as Prometheus asks for it
    raw = httpx.Client(verify=client_context(ca), auth=AUTH)
    with raw.stream("GET", url + "/metrics", headers={"Accept-Encoding": "gzip"}) as resp:
        zipped = b"".join(resp.iter_raw())
        assert resp.headers["content-encoding"] == "gzip"
    raw.close()
    assert b"helios_restore_window_open" in gzip.decompress(zipped)
    # Plain HTTP on the TLS port, and a client that does not trust the CA: no answer at all.
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.replace("https://", "http://") + "/healthz", timeout=5)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        get(url + "/healthz", None)
    fams = metrics_of(url, ca)
    assert (sample(fams, "helios_exporter_http_tls_handshake_failures") or 0) >= 2  # type: ignore[arg-type]
    assert sample(fams, "helios_exporter_http_auth_failures",  # type: ignore[arg-type]
                  path="/metrics", reason="wrong") == 2
    assert sample(fams, "helios_exporter_http_auth_failures",  # type: ignore[arg-type]
                  path="/", reason="missing") == 1
    assert sample(fams, "helios_exporter_web_config_last_reload_successful") == 1  # type: ignore[arg-type]
    assert logged_errors(proc) == []


def test_a_half_open_connection_is_cut_before_its_tls_handshake(
        procs: Procs, tmp_path: Path, pki: dict[str, object]) -> None:
    """The read deadline covers the handshake: a client that connects and sends nothing, or
    half a ClientHello, holds its connection no longer than a plain-HTTP one."""
    ca = _ca(pki).path
    web = write_web_config(tmp_path / "web.yml", server=_cert(pki, "server"))
    _, url = tls_sidecar(procs, web, ca, "--http-read-timeout", "1")
    port = int(url.rsplit(":", 1)[1])
    silent = socket.create_connection(("127.0.0.1", port), timeout=10)
    partial = socket.create_connection(("127.0.0.1", port), timeout=10)
    partial.sendall(b"\x16\x03\x01\x02\x00")  # a TLS record header promising 512 bytes
    t0 = time.monotonic()
    for sock in (silent, partial):
        with contextlib.suppress(ConnectionResetError):  # closed, or reset: either way cut
            assert sock.recv(1) == b""
        sock.close()
    assert time.monotonic() - t0 < 1 + 10  # the deadline, with room for a starved event loop
    assert get(url + "/healthz", ca).status_code == 200


def test_an_expired_server_certificate_is_refused_by_clients(
        procs: Procs, tmp_path: Path, pki: dict[str, object]) -> None:
    """The sidecar serves what it is given (as Go servers do); verifying clients refuse it."""
    ca = _ca(pki).path
    web = write_web_config(tmp_path / "web.yml", server=_cert(pki, "server_expired"))
    proc, url = procs.sidecar("http://127.0.0.1:1", "--web-config-file", str(web), wait=False)
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    wait_until(lambda: httpx.get(url.replace("http://", "https://") + "/healthz",
                                 verify=insecure, timeout=2).status_code == 200, 30, "up", proc)
    with pytest.raises(httpx.ConnectError, match="certificate has expired"):
        get(url.replace("http://", "https://") + "/healthz", ca)


def test_client_certificate_modes_and_allowed_sans(procs: Procs, tmp_path: Path,
                                                   pki: dict[str, object]) -> None:
    """One sidecar, three policies one after the other (each a change of the file, picked up
    without a restart)."""
    ca = _ca(pki).path
    server = _cert(pki, "server")
    good, other_ca = _cert(pki, "client"), _cert(pki, "client_other_ca")
    expired, other_san = _cert(pki, "client_expired"), _cert(pki, "client_other_san")
    web = tmp_path / "web.yml"
    write_web_config(web, server=server, client_auth="RequireAndVerifyClientCert", client_ca=ca)
    proc, url = tls_sidecar(procs, web, ca, client=good)

    def answers(*clients: Issued | None) -> list[int | str]:
        out: list[int | str] = []
        for client in clients:
            try:
                out.append(get(url + "/healthz", ca, client).status_code)
            except httpx.HTTPError as exc:
                out.append(type(exc).__name__)
        return out

    failed = ["ConnectError", "ReadError", "RemoteProtocolError"]
    required = answers(None, other_ca, expired, good)
    assert required[:3] != [200] * 3 and all(a in failed for a in required[:3]), required
    assert required[3] == 200

    write_web_config(web, server=server, client_auth="VerifyClientCertIfGiven", client_ca=ca)
    wait_until(lambda: answers(None) == [200], 10, "the optional policy in force")
    optional = answers(None, good, other_ca, expired)
    assert optional[:2] == [200, 200] and all(a in failed for a in optional[2:]), optional

    write_web_config(web, server=server, client_auth="RequireAndVerifyClientCert", client_ca=ca,
                     extra_tls="client_allowed_sans: [prometheus.monitoring.svc]")
    wait_until(lambda: answers(None) != [200], 10, "the strict policy in force")
    sans = answers(good, other_san)
    assert sans[0] == 200 and sans[1] in failed, sans
    fams = metrics_of(url, ca, good)
    assert (sample(fams, "helios_exporter_http_tls_handshake_failures") or 0) >= 6  # type: ignore[arg-type]
    assert sample(fams, "helios_exporter_web_config_last_reload_successful") == 1  # type: ignore[arg-type]
    assert logged_errors(proc) == []


def test_a_changed_configuration_is_picked_up_without_a_restart(
        procs: Procs, tmp_path: Path, pki: dict[str, object]) -> None:
    ca = _ca(pki)
    web = tmp_path / "web.yml"
    write_web_config(web, server=_cert(pki, "server"), users={"prometheus": PASSWORD})
    proc, url = tls_sidecar(procs, web, ca.path)
    port = int(url.rsplit(":", 1)[1])

    def serial() -> int:
        ctx = client_context(ca.path)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        from cryptography import x509
        return x509.load_der_x509_certificate(der).serial_number

    first_serial = serial()
    # A new password, and a rotated certificate (new files, as cert-manager writes them).
    rotated = ca.issue("server-rotated", server=True)
    write_web_config(web, server=rotated, users={"prometheus": "new-Pa55word"})
    wait_until(lambda: get(url + "/metrics", ca.path, auth=("prometheus", "new-Pa55word"))
               .status_code == 200, 10, "the new password")
    assert get(url + "/metrics", ca.path, auth=AUTH).status_code == 401
    assert serial() != first_serial
    # A broken file: logged, counted, and the last good configuration stays in force.
    web.write_text("basic_auth_users:\n  prometheus: not-a-hash\n")
    time.sleep(1.5)
    assert get(url + "/metrics", ca.path, auth=("prometheus", "new-Pa55word")).status_code == 200
    fams = families(get(url + "/metrics", ca.path, auth=("prometheus", "new-Pa55word")).content)
    wait_until(lambda: sample(families(get(url + "/metrics", ca.path, auth=(
        "prometheus", "new-Pa55word")).content),
        "helios_exporter_web_config_last_reload_successful") == 0, 5, "the failed reload counted")
    del fams
    log = [json.loads(line) for line in proc.log.read_text().splitlines() if line.startswith("{")]
    reloads = [e for e in log if e["event"].startswith("web_config_reload")]
    assert [e["event"] for e in reloads] == ["web_config_reloaded", "web_config_reload_failed"]
    assert "not-a-hash" not in proc.log.read_text()
