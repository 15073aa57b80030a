"""The Prometheus exporter-toolkit web configuration file (`serve --web-config-file F`).

The format of exporter-toolkit's docs/web-configuration.md, read as strictly as exporter-toolkit
reads it (unknown keys are errors), with every problem reported at once:

    tls_server_config:          # TLS on every path
      cert_file: server.crt     # or `cert:` inline PEM; relative paths are relative to this file
      key_file: server.key      # or `key:`
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert, VerifyClientCertIfGiven
      client_ca_file: ca.crt    # or `client_ca:`
      client_allowed_sans: [prometheus.monitoring.svc]
      min_version: TLS12        # TLS10..TLS13
      max_version: TLS13
      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
      prefer_server_cipher_suites: true
    http_server_config:
      http2: true               # accepted; the sidecar speaks HTTP/1.1 (ALPN never offers h2)
      headers: {X-Content-Type-Options: nosniff}
    basic_auth_users:
      prometheus: $2y$10$...    # bcrypt: $2y$ (htpasswd), $2b$ or $2a$
    rate_limit: {interval: 100ms, burst: 20}

What the sidecar does not support is an error, not silently ignored: `curve_preferences` (Python's
ssl module sets one curve, not a preference list) and the client-auth types that accept unverified
certificates (see exporter/web/tls.py).

Every hash is tried once when the file loads (bcrypt of the deployment example's placeholder
password, exporter/placeholders.py), so that a hash bcrypt cannot check is an error here and not
a 401 on every login, and a user still holding the example's hash is refused. `$2x$` hashes (from
crypt_blowfish's pre-2011 bug for 8-bit passwords) and `$2$` are refused: python-bcrypt cannot
check `$2$`, and no current tool makes either.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
import yaml

from exporter import placeholders
from exporter.web import tls as tlsmod
from exporter.web.tls import TlsConfig

# exporter-toolkit's extraHTTPHeaders: the headers that may be set, and their allowed values.
EXTRA_HEADERS: Mapping[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}
_TOP = {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"}
_TLS = {"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
        "client_allowed_sans", "min_version", "max_version", "cipher_suites",
        "prefer_server_cipher_suites", "curve_preferences"}
_BCRYPT = re.compile(r"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class WebConfigError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class RateLimit:
    interval: float  # seconds between requests on average
    burst: int


@dataclass(frozen=True)
class WebConfig:
    path: Path
    tls: TlsConfig | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    headers: tuple[tuple[str, str], ...] = ()
    rate_limit: RateLimit | None = None

    def files(self) -> tuple[Path, ...]:
        return (self.path, *(self.tls.files() if self.tls else ()))


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WebConfigError([f"cannot read {path}: {exc.strerror or exc}"]) from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise WebConfigError([f"{path} is not valid YAML: {exc}"]) from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise WebConfigError([f"{path}: expected a mapping at the top, got {type(raw).__name__}"])
    return raw


def tls_config(path: Path) -> TlsConfig | None:
    """Only `tls_server_config` of the file, without loading a certificate or checking a hash
    (for the image's health check, exporter/healthcheck.py); None when TLS is off."""
    errors: list[str] = []
    tls = _tls(_mapping(_read(path), "tls_server_config", errors), path.parent, errors)
    if errors:
        raise WebConfigError(errors)
    return tls


def load(path: Path) -> tuple[WebConfig, tlsmod.TlsSettings | None]:
    """The configuration and, with TLS, what a connection is upgraded with; `WebConfigError`
    lists every problem."""
    errors: list[str] = []
    raw = _read(path)
    _unknown(raw, _TOP, "", errors)
    base = path.parent
    tls = _tls(_mapping(raw, "tls_server_config", errors), base, errors)
    users = _users(_mapping(raw, "basic_auth_users", errors), errors)
    headers = _headers(_mapping(raw, "http_server_config", errors), errors)
    rate = _rate_limit(_mapping(raw, "rate_limit", errors), errors)
    settings = None
    if tls is not None and not errors:
        try:
            settings = tlsmod.build(tls)
        except tlsmod.TlsError as exc:
            errors += exc.errors
    if errors:
        raise WebConfigError(errors)
    return WebConfig(path, tls, users, headers, rate), settings


def _mapping(raw: Mapping[str, Any], key: str, errors: list[str]) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.append(f"{key}: expected a mapping, got {type(value).__name__}")
        return {}
    return value


def _unknown(raw: Mapping[str, Any], known: set[str], where: str, errors: list[str]) -> None:
    for key in raw:
        if key not in known:
            errors.append(f"{where}{key}: unknown field")


def _str(raw: Mapping[str, Any], key: str, where: str, errors: list[str]) -> str | None:
    value = raw.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        errors.append(f"{where}{key}: expected a string, got {type(value).__name__}")
        return None
    return value


def _tls(raw: dict[str, Any], base: Path, errors: list[str]) -> TlsConfig | None:
    where = "tls_server_config."
    _unknown(raw, _TLS, where, errors)
    s = {key: _str(raw, key, where, errors) for key in
         ("cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type",
          "client_ca_file", "min_version", "max_version")}
    if not any(s[k] for k in ("cert", "key", "client_ca", "cert_file", "key_file",
                              "client_auth_type", "client_ca_file")):
        return None  # exporter-toolkit: TLS is off unless one of these is set
    files: dict[str, Path | None] = {}
    for key in ("cert_file", "key_file", "client_ca_file"):
        name = s[key]
        files[key] = None if name is None else base / name
        if files[key] is not None and not files[key].is_file():  # type: ignore[union-attr]
            errors.append(f"{where}{key}: {files[key]} is not a readable file")
    for inline, path in (("cert", "cert_file"), ("key", "key_file")):
        if s[inline] is None and s[path] is None:
            errors.append(f"{where}: missing one of {inline} or {path}")
        if s[inline] is not None and s[path] is not None:
            errors.append(f"{where}: give {inline} or {path}, not both")
    if s["client_ca"] is not None and s["client_ca_file"] is not None:
        errors.append(f"{where}: give client_ca or client_ca_file, not both")
    auth = s["client_auth_type"] or "NoClientCert"
    has_ca = s["client_ca"] is not None or s["client_ca_file"] is not None
    if auth in tlsmod.UNSUPPORTED_CLIENT_AUTH:
        errors.append(f"{where}client_auth_type: {auth} (accepting unverified client "
                      "certificates) is not supported; use RequireAndVerifyClientCert")
    elif auth not in tlsmod.CLIENT_AUTH:
        errors.append(f"{where}client_auth_type: invalid ClientAuth {auth!r}; expected "
                      f"{', '.join(tlsmod.CLIENT_AUTH)}")
    elif auth == "NoClientCert" and has_ca:
        errors.append(f"{where}: client CA's have been configured without a Client Auth Policy")
    elif auth != "NoClientCert" and not has_ca:
        errors.append(f"{where}client_auth_type: {auth} needs client_ca_file or client_ca")
    sans = raw.get("client_allowed_sans")
    allowed: tuple[str, ...] | None = None
    if sans is not None:
        if not isinstance(sans, list) or not all(isinstance(x, str) for x in sans):
            errors.append(f"{where}client_allowed_sans: expected a list of strings")
        else:
            allowed = tuple(sans)
            if auth != "RequireAndVerifyClientCert":
                errors.append(f"{where}client_allowed_sans: requires client_auth_type "
                              "RequireAndVerifyClientCert")
    versions = []
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        version = s[key] or default
        if version not in tlsmod.TLS_VERSIONS:
            errors.append(f"{where}{key}: unknown TLS version {version!r}; expected "
                          f"{', '.join(tlsmod.TLS_VERSIONS)}")
            version = default
        versions.append(version)
    if tlsmod.TLS_VERSIONS[versions[0]] > tlsmod.TLS_VERSIONS[versions[1]]:
        errors.append(f"{where}: min_version {versions[0]} is above max_version {versions[1]}")
    suites = raw.get("cipher_suites") or []
    if not isinstance(suites, list):
        errors.append(f"{where}cipher_suites: expected a list")
        suites = []
    for suite in suites:
        if suite not in tlsmod.CIPHER_SUITES:
            errors.append(f"{where}cipher_suites: unknown cipher: {suite}")
    prefer = raw.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        errors.append(f"{where}prefer_server_cipher_suites: expected true or false")
        prefer = True
    if raw.get("curve_preferences"):
        errors.append(f"{where}curve_preferences: not supported (Python's ssl module cannot set "
                      "a preference list; OpenSSL's default curves are used)")
    return TlsConfig(
        cert_file=files["cert_file"], cert_pem=s["cert"], key_file=files["key_file"],
        key_pem=s["key"], client_auth_type=auth if auth in tlsmod.CLIENT_AUTH else "NoClientCert",
        client_ca_file=files["client_ca_file"], client_ca_pem=s["client_ca"],
        client_allowed_sans=allowed, min_version=versions[0], max_version=versions[1],
        cipher_suites=tuple(x for x in suites if x in tlsmod.CIPHER_SUITES),
        prefer_server_cipher_suites=prefer)


def _users(raw: dict[str, Any], errors: list[str]) -> dict[str, bytes]:
    users = {}
    for user, hashed in raw.items():
        if not isinstance(user, str) or not user or ":" in user:
            errors.append(f"basic_auth_users: {user!r} is not a user name (a non-empty string "
                          "without ':')")
            continue
        # The hash is a secret too: never echoed back, even when it is wrong.
        if not isinstance(hashed, str) or not _BCRYPT.match(hashed):
            errors.append(f"basic_auth_users.{user}: not a bcrypt hash bcrypt can check "
                          f"({_MAKE_ONE})")
            continue
        verdict = _trial(hashed.encode())
        if verdict is None:
            errors.append(f"basic_auth_users.{user}: bcrypt cannot check this hash ({_MAKE_ONE})")
        elif verdict:
            errors.append(f"basic_auth_users.{user}: the hash of the deployment example's "
                          "placeholder password (deploy/kubernetes-tls), which anyone can read: "
                          f"choose a password, put it in the scrape Secret and its hash here "
                          f"({_MAKE_ONE})")
        else:
            users[user] = hashed.encode()
    return users


_MAKE_ONE = "$2y$, $2b$ or $2a$, a cost and 53 characters, e.g. from " \
    "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`"


@functools.lru_cache(maxsize=256)
def _trial(hashed: bytes) -> bool | None:
    """True when `hashed` verifies the deployment example's password, False when it does not,
    None when bcrypt cannot check it. One bcrypt per hash, remembered: a reload of an unchanged
    file costs none."""
    try:
        return bcrypt.checkpw(placeholders.SCRAPE_PASSWORD.encode(), hashed)
    except ValueError:
        return None


def _headers(raw: dict[str, Any], errors: list[str]) -> tuple[tuple[str, str], ...]:
    _unknown(raw, {"http2", "headers"}, "http_server_config.", errors)
    if not isinstance(raw.get("http2", True), bool):
        errors.append("http_server_config.http2: expected true or false")
    headers = raw.get("headers") or {}
    if not isinstance(headers, dict):
        errors.append("http_server_config.headers: expected a mapping")
        return ()
    out = []
    for name, value in headers.items():
        if name not in EXTRA_HEADERS:
            errors.append(f"http_server_config.headers: HTTP header {name!r} can not be configured")
            continue
        allowed = EXTRA_HEADERS[name]
        if not isinstance(value, str) or (allowed and value not in allowed) or "\n" in value \
                or "\r" in value:
            errors.append(f"http_server_config.headers.{name}: invalid value; expected "
                          f"{' or '.join(allowed) if allowed else 'a single-line string'}")
            continue
        if value:  # blank: unset
            out.append((name, value))
    return tuple(out)


def _rate_limit(raw: dict[str, Any], errors: list[str]) -> RateLimit | None:
    if not raw:
        return None
    _unknown(raw, {"interval", "burst"}, "rate_limit.", errors)
    interval = parse_duration(raw.get("interval", "0s"))
    if interval is None:
        errors.append("rate_limit.interval: expected a duration such as 100ms or 1s")
        return None
    burst = raw.get("burst", 0)
    if interval == 0:
        return None  # exporter-toolkit: 0 disables the limiter
    if not isinstance(burst, int) or isinstance(burst, bool) or burst < 1:
        # Go's limiter with a burst of 0 would refuse every request.
        errors.append("rate_limit.burst: expected a whole number, 1 or more")
        return None
    return RateLimit(interval, burst)


def parse_duration(value: Any) -> float | None:
    """A Go duration string (`1s`, `1m30s`, `250ms`) in seconds; None when it is not one."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return total if pos == len(text) and pos > 0 else None
