"""--web-config-file: the exporter-toolkit format, read strictly, every problem reported at once."""

from __future__ import annotations

import argparse
import ssl
import subprocess
import sys
import time
from pathlib import Path

import bcrypt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from structlog.testing import capture_logs

from exporter import config as cfg
from exporter import placeholders
from exporter.web.hashes import Trials
from exporter.web.state import WebConfigState
from exporter.web.webconfig import WebConfigError, load, parse_duration
from tools.pki import CA, bcrypt_hash, write_web_config


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return CA(tmp_path_factory.mktemp("pki"))


def test_exporter_toolkit_example_loads(tmp_path: Path, ca: CA) -> None:
    """The shape of exporter-toolkit's docs/web-config.yml, with relative paths (resolved
    against the file's folder, as exporter-toolkit does) and `$2y$` hashes."""
    server = ca.issue("server", server=True)
    (tmp_path / "server.crt").write_bytes(server.cert.read_bytes())
    (tmp_path / "server.key").write_bytes(server.key.read_bytes())
    path = tmp_path / "web.yml"
    path.write_text(f"""\
tls_server_config:
  cert_file: server.crt
  key_file: server.key
basic_auth_users:
  alice: {bcrypt_hash("alice-pw")}
  bob: {bcrypt_hash("bob-pw")}
http_server_config:
  http2: true
  headers:
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
rate_limit:
  interval: 100ms
  burst: 20
""")
    config, tls = load(path)
    assert config.tls is not None and config.tls.cert_file == tmp_path / "server.crt"
    assert set(config.users) == {"alice", "bob"}
    assert config.headers == (("X-Frame-Options", "deny"), ("X-Content-Type-Options", "nosniff"))
    assert config.rate_limit is not None and config.rate_limit.interval == pytest.approx(0.1)
    assert tls is not None and tls.context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert tls.context.verify_mode == ssl.CERT_NONE


def test_empty_file_and_basic_auth_only_mean_no_tls(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yml"
    empty.write_text("")
    config, tls = load(empty)
    assert tls is None and config.tls is None and not config.users and not config.headers
    auth = write_web_config(tmp_path / "auth.yml", users={"prometheus": "pw"})
    config, tls = load(auth)
    assert tls is None and config.tls is None and set(config.users) == {"prometheus"}


def test_inline_certificate_and_key(tmp_path: Path, ca: CA) -> None:
    server = ca.issue("inline", server=True)
    indent = "\n".join("    " + ln for ln in server.cert.read_text().splitlines())
    key = "\n".join("    " + ln for ln in server.key.read_text().splitlines())
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert: |\n{indent}\n  key: |\n{key}\n")
    _, tls = load(path)
    assert tls is not None


def test_client_certificate_modes(tmp_path: Path, ca: CA) -> None:
    server = ca.issue("server2", server=True)
    for mode, verify in (("RequireAndVerifyClientCert", ssl.CERT_REQUIRED),
                         ("VerifyClientCertIfGiven", ssl.CERT_OPTIONAL)):
        path = write_web_config(tmp_path / f"{mode}.yml", server=server, client_auth=mode,
                                client_ca=ca.path)
        _, tls = load(path)
        assert tls is not None and tls.context.verify_mode == verify


def test_every_problem_is_reported_at_once(tmp_path: Path, ca: CA) -> None:
    server = ca.issue("server3", server=True)
    path = tmp_path / "bad.yml"
    path.write_text(f"""\
tls_server_config:
  cert_file: {server.cert}
  key_file: missing.key
  client_auth_type: RequireAnyClientCert
  min_version: TLS14
  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]
  curve_preferences: [CurveX]
basic_auth_users:
  alice: not-a-hash
  "bob:x": {bcrypt_hash("pw")}
http_server_config:
  headers:
    X-Frame-Options: allow
    Server: helios
rate_limit:
  interval: soon
unknown_top: 1
""")
    with pytest.raises(WebConfigError) as err:
        load(path)
    text = "\n".join(err.value.errors)
    for needle in ("line 17: unknown_top: unknown field", "key_file:", "missing.key",
                   "RequireAnyClientCert", "unknown TLS version: TLS14",
                   "unknown cipher: TLS_RSA_WITH_RC4_128_SHA", "unknown curve: CurveX",
                   "basic_auth_users.alice: not a bcrypt hash", "'bob:x' can never log in",
                   "invalid value for X-Frame-Options", "'Server' can not be configured",
                   "line 16: rate_limit.interval: cannot unmarshal !!str `soon` into time.Duration"):
        assert needle in text, needle
    assert "not-a-hash" not in text  # a (wrong) secret is never echoed


@pytest.mark.parametrize(("tls", "message"), [
    ("  client_ca_file: {ca}\n", "client CA's have been configured without a Client Auth Policy"),
    ("  client_auth_type: RequireAndVerifyClientCert\n",
     "RequireAndVerifyClientCert without client_ca_file or client_ca"),
    ("  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: {ca}\n"
     "  client_allowed_sans: [prometheus]\n", "requires client_auth_type RequireAndVerifyClientCert"),
    ("  min_version: TLS13\n  max_version: TLS12\n", "above max_version"),
    ("  client_auth_type: Sometimes\n", "invalid ClientAuth: Sometimes"),
])
def test_inconsistent_tls(tmp_path: Path, ca: CA, tls: str, message: str) -> None:
    server = ca.issue("server4", server=True)
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {server.cert}\n  key_file: {server.key}\n"
                    + tls.format(ca=ca.path))
    with pytest.raises(WebConfigError, match=message):
        load(path)


def _tls_errors(tmp_path: Path, cert: Path, key: Path, ca: Path | None = None) -> list[str]:
    path = tmp_path / "web.yml"
    extra = f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {ca}\n" if ca else ""
    path.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n{extra}")
    with pytest.raises(WebConfigError) as err:
        load(path)
    return err.value.errors


def test_certificate_and_key_swapped(tmp_path: Path, ca: CA) -> None:
    """OpenSSL says `[SSL] PEM lib`; the sidecar says which file holds what."""
    server = ca.issue("swapped", server=True)
    errors = _tls_errors(tmp_path, server.key, server.cert)
    assert errors == [
        f"tls_server_config.cert_file {server.key}: holds a private key, not a certificate (are "
        "the certificate and the key swapped?)",
        f"tls_server_config.key_file {server.cert}: holds a certificate, not a private key (are "
        "the certificate and the key swapped?)"]


@pytest.mark.parametrize("other_kind", ["ec", "rsa"])
def test_a_key_that_does_not_match_the_certificate(tmp_path: Path, ca: CA, other_kind: str) -> None:
    """OpenSSL says KEY_VALUES_MISMATCH (or NO_CERTIFICATE_ASSIGNED for another key type)."""
    one = ca.issue("one", server=True)
    if other_kind == "ec":
        key = ca.issue("other", server=True).key
    else:
        key = tmp_path / "rsa.key"
        key.write_bytes(rsa.generate_private_key(65537, 2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption()))
    (error,) = _tls_errors(tmp_path, one.cert, key)
    assert error.startswith(f"tls_server_config.key_file {key}: not the key of the certificate "
                            f"in tls_server_config.cert_file {one.cert}")


def test_files_that_are_not_pem_or_not_what_they_should_be(tmp_path: Path, ca: CA) -> None:
    server = ca.issue("der", server=True)
    der = tmp_path / "server.der"
    der.write_bytes(x509.load_pem_x509_certificate(server.cert.read_bytes()).public_bytes(
        serialization.Encoding.DER))
    text = tmp_path / "notes.txt"
    text.write_text("not a certificate\n")
    broken = tmp_path / "broken.crt"
    broken.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(serialization.load_pem_private_key(server.key.read_bytes(), None)
                          .private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(b"pw")))
    errors = _tls_errors(tmp_path, der, encrypted, ca=server.key)
    assert errors[0].startswith(f"tls_server_config.cert_file {der}: not PEM") and "DER" in errors[0]
    assert errors[1] == (f"tls_server_config.key_file {encrypted}: the key is encrypted: "
                         "encrypted keys are not supported")
    assert errors[2].startswith(f"tls_server_config.client_ca_file {server.key}: holds a private "
                                "key, not a certificate")
    errors = _tls_errors(tmp_path, broken, text)
    assert errors[0].startswith(f"tls_server_config.cert_file {broken}: not a valid PEM "
                                "certificate")
    assert errors[1] == f"tls_server_config.key_file {text}: not PEM: no '-----BEGIN' line"


def test_an_expired_certificate_loads_with_a_warning(tmp_path: Path, ca: CA) -> None:
    """As Go servers do, it is served (verifying clients refuse it); the warning names it."""
    expired = ca.issue("expired", server=True, expired=True)
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {expired.cert}\n  key_file: {expired.key}\n")
    _, tls = load(path)
    assert tls is not None
    (warning,) = tls.warnings
    assert warning.startswith(f"tls_server_config.cert_file {expired.cert}: the certificate "
                              "expired at ")
    with capture_logs() as logs:
        WebConfigState(path)
    assert [(e["event"], e["warning"]) for e in logs] == [("web_config_warning", warning)]


@pytest.mark.parametrize("prefix", ["$2$", "$2x$"])
def test_hash_prefixes_bcrypt_cannot_check_are_refused(tmp_path: Path, prefix: str) -> None:
    good = bcrypt_hash("pw")
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  alice: {prefix}{good[4:]}\n")
    with pytest.raises(WebConfigError, match=r"basic_auth_users\.alice: not a bcrypt hash bcrypt "
                       r"can check \(\$2y\$, \$2b\$ or \$2a\$"):
        load(path)


def test_every_accepted_prefix_logs_in_and_an_unusable_hash_is_an_error(tmp_path: Path) -> None:
    good = bcrypt_hash("pw")  # $2y$
    users = {p: f"${p}${good[4:]}" for p in ("2a", "2b", "2y")}
    path = tmp_path / "web.yml"
    path.write_text("basic_auth_users:\n" + "".join(f"  u{p}: {h}\n" for p, h in users.items()))
    config, _ = load(path)
    assert all(bcrypt.checkpw(b"pw", h) for h in config.users.values())
    # The pattern of a hash, but not a salt bcrypt can read: every login would be a 401.
    path.write_text("basic_auth_users:\n  alice: $2b$10$" + "z" * 53 + "\n")
    with pytest.raises(WebConfigError, match=r"basic_auth_users\.alice: bcrypt cannot check this "
                       "hash"):
        load(path)


def test_the_example_password_is_refused(tmp_path: Path) -> None:
    path = write_web_config(tmp_path / "web.yml",
                            users={"prometheus": placeholders.SCRAPE_PASSWORD, "alice": "own-Pa55"})
    with pytest.raises(WebConfigError) as err:
        load(path)
    (error,) = err.value.errors
    assert error.startswith("basic_auth_users.prometheus: the hash of the deployment example's "
                            "placeholder password")


def test_not_yaml_and_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text("tls_server_config: [unclosed\n")
    with pytest.raises(WebConfigError, match="not valid YAML"):
        load(path)
    path.write_text("- a list\n")
    with pytest.raises(WebConfigError,
                       match=r"line 1: \(top\): cannot unmarshal !!seq into web.Config"):
        load(path)


def test_go_durations() -> None:
    assert parse_duration("1s") == 1.0
    assert parse_duration("1m30s") == 90.0
    assert parse_duration("250ms") == pytest.approx(0.25)
    assert parse_duration("0") == 0.0
    assert parse_duration("-1.5s") == -1.5
    for bad in ("", "1", "s", "1x", "1s garbage", 5):
        assert parse_duration(bad) is None


@pytest.mark.e2e
def test_serve_reports_web_config_errors_with_the_others(tmp_path: Path) -> None:
    """Through the command line's own loader: all errors at once, exit 2 (like every flag)."""
    path = tmp_path / "web.yml"
    path.write_text("basic_auth_users:\n  alice: nope\nbogus: 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--engine-url", "http://127.0.0.1:1",
         "--web-config-file", str(path), "--http-read-timeout", "0", "--state-dir",
         str(tmp_path / "s"), "--no-nvml"], capture_output=True, text=True, timeout=60,
        check=False)
    assert done.returncode == 2, done.stderr
    assert "--http-read-timeout / HELIOS_EXPORTER_HTTP_READ_TIMEOUT: must be greater than 0" \
        in done.stderr
    assert "basic_auth_users.alice: not a bcrypt hash" in done.stderr
    assert "bogus: unknown field" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_web_config_file_is_a_config_error(tmp_path: Path) -> None:
    args = argparse.Namespace(engine_url="http://127.0.0.1:1",
                              web_config_file=str(tmp_path / "absent.yml"))
    with pytest.raises(cfg.ConfigError, match="cannot read"):
        cfg.load(args, "serve", environ={})


def test_reload_keeps_the_last_good_configuration(tmp_path: Path) -> None:
    now = [0.0]
    path = write_web_config(tmp_path / "web.yml", users={"alice": "one"})
    state = WebConfigState(path, clock=lambda: now[0], wall=lambda: 1000.0 + now[0])
    first = state.config.users["alice"]
    write_web_config(path, users={"alice": "two"})
    assert state.config.users["alice"] == first  # within a second: not looked at yet
    now[0] = 1.5
    assert state.config.users["alice"] != first
    assert state.last_reload_ok and state.last_success == 1001.5 and state.reloads["success"] == 1
    good = state.config.users["alice"]
    path.write_text("basic_auth_users:\n  alice: broken\n")
    now[0] = 3.0
    assert state.config.users["alice"] == good
    assert not state.last_reload_ok and state.reloads["failure"] == 1
    now[0] = 5.0  # the same broken file is not reported again
    assert state.config.users["alice"] == good and state.reloads["failure"] == 1


def test_turning_tls_on_needs_a_restart(tmp_path: Path, ca: CA) -> None:
    now = [0.0]
    path = write_web_config(tmp_path / "web.yml", users={"alice": "one"})
    state = WebConfigState(path, clock=lambda: now[0])
    write_web_config(path, server=ca.issue("later", server=True), users={"alice": "one"})
    now[0] = 2.0
    assert state.tls() is None and not state.last_reload_ok


def test_a_slow_hash_loads_at_once_and_is_tried_in_the_background(tmp_path: Path) -> None:
    """A cost-18 hash (about 15 s a check here) is not tried at load (well over the budget); the
    load takes no check of it. A reload's new hashes are tried in the background only: one of
    the example's password is refused when its trial ends, and said so."""
    slow = "$2y$18$Oba1QfI15NPs6SFGFadnBe228HjLNxmK7MWm8k5zpcwARlb71HNLi"
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  bob: {slow}\n")
    trials = Trials()
    t0 = time.monotonic()
    config, _ = load(path, trials=trials)
    assert time.monotonic() - t0 < 1.0  # the promise: no check of it delays the start
    assert set(config.users) == {"bob"} and trials.verdict(slow.encode()) is None

    now = [0.0]
    write_web_config(path, users={"alice": "own-Pa55"})
    state = WebConfigState(path, clock=lambda: now[0], trials=trials)
    assert set(state.users) == {"alice"}
    write_web_config(path, users={"alice": "own-Pa55",
                                  "prometheus": placeholders.SCRAPE_PASSWORD})
    now[0] = 2.0
    with capture_logs() as logs:
        assert set(state.config.users) == {"alice", "prometheus"}  # loaded, not tried yet
        assert trials.wait(30)
    assert set(state.users) == {"alice"}  # refused once its trial ended
    refused = [e for e in logs if e["event"] == "web_config_user_refused"]
    assert [e["user"] for e in refused] == ["prometheus"]
    assert "placeholder password" in refused[0]["reason"]
