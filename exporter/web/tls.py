"""An `ssl.SSLContext` from the `tls_server_config` of a web configuration file.

Go's names (exporter-toolkit passes them to crypto/tls) mapped onto OpenSSL's: cipher suites
(TLS 1.2 and below; like Go, TLS 1.3 suites are not configurable and always on), versions and
client-certificate policies. Python's ssl module verifies every client certificate it receives
against the client CA, so Go's two policies that accept unverified certificates
(`RequestClientCert`, `RequireAnyClientCert`) cannot be offered; exporter-toolkit itself calls
everything but `RequireAndVerifyClientCert` insecure for client authentication.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509

from exporter.web import certs

TLS_VERSIONS: Mapping[str, ssl.TLSVersion] = {
    "TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3,
}
# Go's crypto/tls.CipherSuites() names -> OpenSSL names; None: a TLS 1.3 suite, always enabled.
CIPHER_SUITES: Mapping[str, str | None] = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
}
CLIENT_AUTH: Mapping[str, ssl.VerifyMode] = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
UNSUPPORTED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
# exporter-toolkit's curve names -> OpenSSL's. Python's ssl module sets one curve
# (`set_ecdh_curve`), so of a list only the first is offered.
CURVES: Mapping[str, str] = {"CurveP256": "prime256v1", "CurveP384": "secp384r1",
                             "CurveP521": "secp521r1", "X25519": "X25519"}


@dataclass(frozen=True)
class TlsConfig:
    """`tls_server_config`, validated: relative paths already resolved against the file's folder;
    a PEM text given inline instead of a file (`cert`, `key`, `client_ca`) is in the *_pem field."""

    cert_file: Path | None = None
    cert_pem: str | None = None
    key_file: Path | None = None
    key_pem: str | None = None
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    client_ca_pem: str | None = None
    client_allowed_sans: tuple[str, ...] | None = None
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    cipher_suites: tuple[str, ...] = ()
    prefer_server_cipher_suites: bool = True
    curve: str | None = None  # OpenSSL's name of the one curve offered; None: OpenSSL's defaults
    # VerifyClientCertIfGiven without a client CA: verified against the system's roots, as Go does.
    system_roots: bool = False

    def files(self) -> tuple[Path, ...]:
        """The files it reads: a change to any of them is a change of configuration."""
        return tuple(p for p in (self.cert_file, self.key_file, self.client_ca_file) if p)


@dataclass(frozen=True)
class Expiry:
    """When a certificate of the configuration expires (`certificate`: server or client_ca)."""

    certificate: str
    not_after: float  # unix seconds: the earliest NotAfter of the file's certificates
    subject: str  # of that certificate, RFC 4514
    where: str  # the field and file, as errors name them


@dataclass(frozen=True)
class TlsSettings:
    """What a new connection is upgraded with, what to warn about (a certificate outside
    its validity period), and when the certificates in it expire."""

    context: ssl.SSLContext
    allowed_sans: frozenset[str] | None
    warnings: tuple[str, ...] = ()
    expiry: tuple[Expiry, ...] = ()


class TlsError(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def build(tls: TlsConfig) -> TlsSettings:
    """Raises TlsError listing every problem, each naming its field and file."""
    errors: list[str] = []
    cert_where, cert = _pem("cert", tls.cert_file, tls.cert_pem, errors)
    key_where, key = _pem("key", tls.key_file, tls.key_pem, errors)
    warnings: list[str] = []
    expiry: list[Expiry] = []
    if cert is not None and key is not None:
        warnings = certs.check_pair(cert, cert_where, key, key_where, errors)
        if not errors:
            expiry.append(_earliest("server", certs.certificates(cert, cert_where, errors),
                                    cert_where))
    ca_where, ca = _pem("client_ca", tls.client_ca_file, tls.client_ca_pem, errors)
    if ca is not None:
        authorities = certs.certificates(ca, ca_where, errors)
        if authorities:
            expiry.append(_earliest("client_ca", authorities, ca_where))
    if errors:
        raise TlsError(errors)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = TLS_VERSIONS[tls.min_version]
    ctx.maximum_version = TLS_VERSIONS[tls.max_version]
    # OpenSSL has the last word on what it loads (its errors name no file: checked above).
    try:
        with pem_path(tls.cert_file, tls.cert_pem) as cert_path, \
                pem_path(tls.key_file, tls.key_pem) as key_path:
            ctx.load_cert_chain(cert_path, key_path, password=_no_password)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise TlsError([f"{cert_where} and {key_where}: OpenSSL cannot load them: "
                        f"{_why(exc)}"]) from exc
    ctx.verify_mode = CLIENT_AUTH[tls.client_auth_type]
    if ca is not None:
        try:
            ctx.load_verify_locations(cadata=ca.decode("ascii", errors="replace"))
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise TlsError([f"{ca_where}: OpenSSL cannot load it: {_why(exc)}"]) from exc
    elif tls.system_roots:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    if tls.curve is not None:
        ctx.set_ecdh_curve(tls.curve)
    openssl = [name for s in tls.cipher_suites if (name := CIPHER_SUITES[s])]
    if openssl:
        try:
            ctx.set_ciphers(":".join(openssl))
        except ssl.SSLError as exc:
            raise TlsError([f"tls_server_config.cipher_suites: {_why(exc)}"]) from exc
    # Python's server contexts prefer the server's order from the start: clear it for false.
    if tls.prefer_server_cipher_suites:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    sans = None if tls.client_allowed_sans is None else frozenset(
        _normal_san(s) for s in tls.client_allowed_sans)
    return TlsSettings(ctx, sans, tuple(warnings), tuple(expiry))


def _earliest(certificate: str, chain: list[x509.Certificate], where: str) -> Expiry:
    """What expires first: a chain is refused once any certificate of it has expired."""
    first = min(chain, key=lambda c: c.not_valid_after_utc)
    return Expiry(certificate, first.not_valid_after_utc.timestamp(), first.subject.rfc4514_string(),
                  where)


def _pem(field: str, path: Path | None, inline: str | None,
         errors: list[str]) -> tuple[str, bytes | None]:
    """How errors name it (`tls_server_config.cert_file /etc/tls.crt`), and its bytes."""
    if path is None:
        return f"tls_server_config.{field} (inline)", None if inline is None else inline.encode()
    where = f"tls_server_config.{field}_file {path}"
    try:
        return where, path.read_bytes()
    except OSError as exc:
        errors.append(f"{where}: cannot read it: {exc.strerror or exc}")
        return where, None


def san_allowed(peercert: Any, allowed: frozenset[str]) -> bool:
    """exporter-toolkit's `client_allowed_sans`: one of the client certificate's DNS, e-mail, IP
    or URI subject alternative names is in the list, exactly (IP addresses compared as
    addresses: OpenSSL and Go spell IPv6 differently)."""
    if not isinstance(peercert, dict):
        return False
    names = peercert.get("subjectAltName", ())
    return any(kind in ("DNS", "email", "URI", "IP Address") and _normal_san(str(value)) in allowed
               for kind, value in names)


def _normal_san(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        return value


def _no_password() -> str:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key.
    raise ValueError("the key is encrypted: encrypted keys are not supported")


def _why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)


class pem_path:  # a context manager used like a function
    """A path for `load_cert_chain`, which reads only files: the file itself, or inline PEM in an
    anonymous memory file (never on disk: it may be a private key)."""

    def __init__(self, path: Path | None, pem: str | None) -> None:
        self._path, self._pem, self._fd = path, pem, -1

    def __enter__(self) -> str:
        if self._path is not None:
            return str(self._path)
        self._fd = os.memfd_create("helios-exporter-tls", os.MFD_CLOEXEC)
        os.write(self._fd, (self._pem or "").encode())
        return f"/proc/self/fd/{self._fd}"

    def __exit__(self, *_: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)
