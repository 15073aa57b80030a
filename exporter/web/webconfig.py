"""The Prometheus exporter-toolkit web configuration file (`serve --web-config-file F`).

The format of exporter-toolkit's docs/web-configuration.md, decoded as exporter-toolkit decodes it
(exporter/web/goyaml.py: yaml.v2's strict reading, its coercions and zero values), with every
problem reported at once:

    tls_server_config:          # TLS on every path
      cert_file: server.crt     # or `cert:` inline PEM; relative paths are relative to this file
      key_file: server.key      # or `key:`
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert, VerifyClientCertIfGiven
      client_ca_file: ca.crt    # or `client_ca:`
      client_allowed_sans: [prometheus.monitoring.svc]
      min_version: TLS12        # TLS10..TLS13
      max_version: TLS13
      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
      curve_preferences: [X25519]
      prefer_server_cipher_suites: true
    http_server_config:
      http2: true               # accepted; the sidecar speaks HTTP/1.1 (ALPN never offers h2)
      headers: {X-Content-Type-Options: nosniff}
    basic_auth_users:
      prometheus: $2y$10$...    # bcrypt: $2y$ (htpasswd), $2b$ or $2a$
    rate_limit: {interval: 100ms, burst: 20}

Where the sidecar deliberately does otherwise (docs/interface.md lists each case with its reason),
it refuses with an error that says so, or loads with a warning (`WebConfig.warnings`, logged as
`web_config_warning`); it never silently ignores a field.

A hash bcrypt cannot check is an error at load, not a 401 on every login (exporter/web/hashes.py
tells in a millisecond, whatever the cost); `$2x$` hashes (from crypt_blowfish's pre-2011 bug for
8-bit passwords) and `$2$` are refused too: python-bcrypt cannot check `$2$`, and no current tool
makes either. A user still holding the deployment example's hash is refused: at load when the
hash's trial fits the load's budget, otherwise once its trial in the background finishes (and
at once at login: the example's password is refused, exporter/web/basic_auth.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.defaults import AUTH_LOAD_TRIAL_BUDGET
from exporter.web import goyaml, hashes
from exporter.web import tls as tlsmod
from exporter.web.goyaml import (
    BOOLEAN,
    DURATION,
    INTEGER,
    STRING,
    Map,
    Scalar,
    Seq,
    Struct,
    Zero,
)
from exporter.web.hashes import TRIALS, Trials
from exporter.web.tls import TlsConfig

# exporter-toolkit's extraHTTPHeaders: the headers that may be set, and their allowed values.
EXTRA_HEADERS: Mapping[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}
_SECRET = Scalar("string", "config.Secret")
# exporter-toolkit's web.Config, field by field, with the Go type yaml.v2 decodes each into.
SCHEMA = Struct("web.Config", {
    "tls_server_config": Struct("web.TLSConfig", {
        "cert": STRING, "key": _SECRET, "client_ca": STRING, "cert_file": STRING,
        "key_file": STRING, "client_auth_type": STRING, "client_ca_file": STRING,
        "cipher_suites": Seq(STRING, "[]web.Cipher"), "curve_preferences": Seq(STRING, "[]web.Curve"),
        "min_version": STRING, "max_version": STRING, "prefer_server_cipher_suites": BOOLEAN,
        "client_allowed_sans": Seq(STRING, "[]string"),
    }),
    "http_server_config": Struct("web.HTTPConfig", {
        "http2": BOOLEAN, "headers": Map(STRING, "map[string]string")}),
    "rate_limit": Struct("web.RateLimiterConfig", {"burst": INTEGER, "interval": DURATION}),
    "basic_auth_users": Map(_SECRET, "map[string]config.Secret"),
})
# exporter-toolkit's IsEnabled(): TLS is on when one of these is set.
_TLS_ON = ("cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type",
           "client_ca_file")
_BCRYPT = re.compile(r"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class WebConfigError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class RateLimit:
    interval: float  # seconds between requests on average (> 0)
    burst: int  # 0 or less: every request is refused, as with exporter-toolkit


@dataclass(frozen=True)
class WebConfig:
    path: Path
    tls: TlsConfig | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    headers: tuple[tuple[str, str], ...] = ()
    rate_limit: RateLimit | None = None
    warnings: tuple[str, ...] = ()  # loaded, but not as exporter-toolkit would serve it

    def files(self) -> tuple[Path, ...]:
        return (self.path, *(self.tls.files() if self.tls else ()))


Section = dict[str, Any] | Zero


def _read(path: Path) -> goyaml.Decoded:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WebConfigError([f"cannot read {path}: {exc.strerror or exc}"]) from exc
    try:
        return goyaml.decode(data, SCHEMA)
    except goyaml.YamlError as exc:
        raise WebConfigError([f"{path} is not valid YAML: {exc}"]) from exc


def _section(raw: Any, key: str) -> Section:
    """A struct field of the top level: its fields, the zero struct (given as null), or {}
    (absent: every field at exporter-toolkit's default)."""
    value = raw.get(key) if isinstance(raw, dict | Zero) else None
    return value if isinstance(value, dict | Zero) else {}


def tls_config(path: Path) -> TlsConfig | None:
    """Only `tls_server_config` of the file, without loading a certificate or checking a hash
    (for the image's health check, exporter/healthcheck.py); None when TLS is off."""
    decoded = _read(path)
    errors = [e for e in decoded.errors if ": tls_server_config" in e or ": (top)" in e]
    tls = _tls(_section(decoded.value, "tls_server_config"), path.parent, errors, [],
               decoded.failed)
    if errors:
        raise WebConfigError(errors)
    return tls


def load(path: Path, *, trials: Trials = TRIALS, trial_budget: float = AUTH_LOAD_TRIAL_BUDGET,
         ) -> tuple[WebConfig, tlsmod.TlsSettings | None]:
    """The configuration and, with TLS, what a connection is upgraded with; `WebConfigError`
    lists every problem. New hashes are tried against the deployment example's password for at
    most `trial_budget` seconds (exporter/web/hashes.py); those left untried are the caller's to
    try in the background (`trials.in_background`)."""
    decoded = _read(path)
    errors, warnings = list(decoded.errors), list[str]()
    raw = decoded.value
    tls = _tls(_section(raw, "tls_server_config"), path.parent, errors, warnings, decoded.failed)
    users = _users(raw.get("basic_auth_users") or {}, errors, trials, trial_budget)
    headers = _headers(_section(raw, "http_server_config"), errors)
    rate = _rate_limit(_section(raw, "rate_limit"), warnings)
    settings = None
    if tls is not None and not errors:
        try:
            settings = tlsmod.build(tls)
        except tlsmod.TlsError as exc:
            errors += exc.errors
    if errors:
        raise WebConfigError(errors)
    return WebConfig(path, tls, users, headers, rate, tuple(warnings)), settings


def _tls(raw: Section, base: Path, errors: list[str], warnings: list[str],
         failed: set[str]) -> TlsConfig | None:
    where = "tls_server_config."
    s = {key: raw.get(key) or "" for key in (*_TLS_ON, "min_version", "max_version")}
    # Decoded into Go types with their own UnmarshalYAML: an unknown name is a decoding error
    # in exporter-toolkit, TLS on or off.
    suites = [x for x in raw.get("cipher_suites") or [] if x]
    for suite in suites:
        if suite not in tlsmod.CIPHER_SUITES:
            errors.append(f"{where}cipher_suites: unknown cipher: {suite}")
    curves = [x for x in raw.get("curve_preferences") or [] if x]
    for curve in curves:
        if curve not in tlsmod.CURVES:
            errors.append(f"{where}curve_preferences: unknown curve: {curve}")
    versions = []
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        # Absent: exporter-toolkit's default; null or "": Go's (TLS 1.2 to 1.3 for a server).
        version = raw.get(key, default) or default
        if version not in tlsmod.TLS_VERSIONS:
            errors.append(f"{where}{key}: unknown TLS version: {version}")
            version = default
        versions.append(version)
    if not any(s[k] for k in _TLS_ON):
        return None  # exporter-toolkit: TLS is off unless one of these is set
    files: dict[str, Path | None] = {}
    for key in ("cert_file", "key_file", "client_ca_file"):
        name = s[key]
        files[key] = None if not name else base / name
        if files[key] is not None and not files[key].is_file():  # type: ignore[union-attr]
            errors.append(f"{where}{key}: {files[key]} is not a readable file")
    for inline, path in (("cert", "cert_file"), ("key", "key_file"), ("client_ca", "client_ca_file")):
        if inline != "client_ca" and not s[inline] and not s[path] and not {
                where + inline, where + path} & failed:
            errors.append(f"{where}: missing one of {inline} or {path}")
        if s[inline] and s[path]:
            warnings.append(f"{where}: both {inline} and {path} are given: {path} is used, "
                            f"{inline} ignored (as exporter-toolkit does)")
    auth = s["client_auth_type"] or "NoClientCert"
    has_ca = bool(s["client_ca"] or s["client_ca_file"])
    system_roots = False
    if auth in tlsmod.UNSUPPORTED_CLIENT_AUTH:
        errors.append(f"{where}client_auth_type: {auth} (accepting client certificates nobody "
                      "verified) is not supported: Python's TLS verifies every client "
                      "certificate it receives; use RequireAndVerifyClientCert with client_ca_file")
    elif auth not in tlsmod.CLIENT_AUTH:
        errors.append(f"{where}client_auth_type: invalid ClientAuth: {auth}")
    elif auth == "NoClientCert" and has_ca:
        errors.append(f"{where}: client CA's have been configured without a Client Auth Policy")
    elif auth == "RequireAndVerifyClientCert" and not has_ca:
        errors.append(f"{where}client_auth_type: RequireAndVerifyClientCert without "
                      "client_ca_file or client_ca: exporter-toolkit would verify client "
                      "certificates against the system's public roots, so a certificate any "
                      "public CA issued would pass; give the CA that issues your clients' "
                      "certificates")
    elif auth == "VerifyClientCertIfGiven" and not has_ca:
        system_roots = True
        warnings.append(f"{where}client_auth_type: VerifyClientCertIfGiven without client_ca_file "
                        "or client_ca: a client certificate, when one is sent, is verified "
                        "against the system's roots (as exporter-toolkit does); clients "
                        "without one are served")
    sans = raw.get("client_allowed_sans")
    if sans is not None and auth != "RequireAndVerifyClientCert":
        errors.append(f"{where}client_allowed_sans: requires client_auth_type "
                      "RequireAndVerifyClientCert (the names restrict nothing unless every "
                      "client must present a verified certificate)")
    if tlsmod.TLS_VERSIONS[versions[0]] > tlsmod.TLS_VERSIONS[versions[1]]:
        errors.append(f"{where}: min_version {versions[0]} is above max_version {versions[1]}: "
                      "no connection could be made")
    if len(curves) > 1:
        warnings.append(f"{where}curve_preferences: only {curves[0]}, the first, is offered "
                        "(Python's ssl module sets one curve, not a list)")
    return TlsConfig(
        cert_file=files["cert_file"], cert_pem=s["cert"] or None, key_file=files["key_file"],
        key_pem=s["key"] or None,
        client_auth_type=auth if auth in tlsmod.CLIENT_AUTH else "NoClientCert",
        client_ca_file=files["client_ca_file"],
        client_ca_pem=None if files["client_ca_file"] else s["client_ca"] or None,
        client_allowed_sans=None if sans is None else tuple(sans),
        min_version=versions[0], max_version=versions[1],
        cipher_suites=tuple(x for x in suites if x in tlsmod.CIPHER_SUITES),
        prefer_server_cipher_suites=raw.get("prefer_server_cipher_suites", True),
        curve=tlsmod.CURVES.get(curves[0]) if curves else None, system_roots=system_roots)


def _users(raw: Mapping[str, str], errors: list[str], trials: Trials,
           budget: float) -> dict[str, bytes]:
    users = {}
    for user, hashed in raw.items():
        if ":" in user:
            errors.append(f"basic_auth_users: {user!r} can never log in: basic auth ends the "
                          "user name at the first ':'")
            continue
        # The hash is a secret too: never echoed back, even when it is wrong.
        if not _BCRYPT.match(hashed):
            errors.append(f"basic_auth_users.{user}: not a bcrypt hash bcrypt can check "
                          f"({_MAKE_ONE})")
        elif not hashes.readable(hashed.encode()):
            errors.append(f"basic_auth_users.{user}: bcrypt cannot check this hash ({_MAKE_ONE})")
        else:
            users[user] = hashed.encode()
    trials.try_now(users.values(), budget)
    for user, hashed_ in list(users.items()):
        trial = trials.verdict(hashed_)
        if trial is not None and trial.placeholder:
            errors.append(f"basic_auth_users.{user}: {PLACEHOLDER_HASH} ({_MAKE_ONE})")
            del users[user]
    return users


PLACEHOLDER_HASH = "the hash of the deployment example's placeholder password " \
    "(deploy/kubernetes-tls), which anyone can read: choose a password, put it in the scrape " \
    "Secret and its hash here"
_MAKE_ONE = "$2y$, $2b$ or $2a$, a cost and 53 characters, e.g. from " \
    "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`"


def _headers(raw: Section, errors: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for name, given in (raw.get("headers") or {}).items():
        if name not in EXTRA_HEADERS:
            errors.append(f"http_server_config.headers: HTTP header {name!r} can not be configured")
            continue
        allowed = EXTRA_HEADERS[name]
        if allowed and given not in allowed:
            errors.append(f"http_server_config.headers: invalid value for {name}: expected one "
                          f"of {', '.join(allowed)}, got {given!r}")
            continue
        # Go's net/http writes a line break in a header value as a space.
        value = given.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
        if _CONTROL.search(value):
            errors.append(f"http_server_config.headers.{name}: a control character is not "
                          "allowed in a header value")
            continue
        out.append((name, value))
    return tuple(out)


def _rate_limit(raw: Section, warnings: list[str]) -> RateLimit | None:
    """exporter-toolkit's limiter: `interval: 0` (or none, or below 0: `rate.Every` of it is
    unlimited) is no limit; a `burst` of 0 or less with an interval lets nothing through."""
    interval, burst = raw.get("interval") or 0, raw.get("burst") or 0
    if interval <= 0:
        return None
    if burst <= 0:
        warnings.append(f"rate_limit: burst {burst} with interval {interval / 1e9:g}s: every "
                        "request but the probes is answered 429, as exporter-toolkit does; a "
                        "burst of 1 or more lets requests through")
    return RateLimit(interval / 1e9, burst)


def parse_duration(value: Any) -> float | None:
    """A Go duration string (`1s`, `1m30s`, `250ms`, `-1h`) in seconds; None when it is not one."""
    if not isinstance(value, str):
        return None
    nanoseconds = goyaml.go_duration(value.strip())
    return None if nanoseconds is None else nanoseconds / 1e9
