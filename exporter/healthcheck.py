"""The image's HEALTHCHECK: `GET /healthz` on 127.0.0.1, over TLS when the web configuration
turns TLS on (`python -m exporter.healthcheck`; exit 0 healthy, 1 not, the reason on stderr).

Inside the container, with nothing but the standard library and the sidecar's own package: it
reads the port from `HELIOS_EXPORTER_LISTEN` and the web configuration from
`HELIOS_EXPORTER_WEB_CONFIG_FILE`, as the sidecar does (flags given after the image name are not
seen: override the health check then). Under TLS it does not verify the server's certificate: the
connection never leaves the container, and the check asks whether the sidecar answers, not who it
is (a kubelet's HTTPS probe does the same). Only `tls_server_config` is read, no certificate
loaded and no bcrypt run, so the check stays cheap. With `client_auth_type:
RequireAndVerifyClientCert` it presents the sidecar's own certificate and key: that passes when
the client CA issued the certificate and it may be used for client authentication (cert-manager:
`usages: [server auth, client auth]`); otherwise override the health check.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from exporter.defaults import ENV_PREFIX, LISTEN_PORT
from exporter.web.tls import TlsConfig, pem_path
from exporter.web.webconfig import WebConfigError, tls_config

TIMEOUT = 3.0  # below the image's --timeout=5s


def address(environ: Mapping[str, str]) -> str:
    port = environ.get(ENV_PREFIX + "LISTEN", "").rpartition(":")[2].strip() or str(LISTEN_PORT)
    return f"127.0.0.1:{port}"


@contextlib.contextmanager
def _context(tls: TlsConfig) -> Iterator[ssl.SSLContext]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # 127.0.0.1 inside the container: liveness, not identity
    if tls.client_auth_type == "RequireAndVerifyClientCert":
        with pem_path(tls.cert_file, tls.cert_pem) as cert, pem_path(tls.key_file, tls.key_pem) as key:
            ctx.load_cert_chain(cert, key)
    yield ctx


def check(environ: Mapping[str, str]) -> str | None:
    """None when /healthz answers 200, else why not."""
    where = address(environ)
    web = environ.get(ENV_PREFIX + "WEB_CONFIG_FILE")
    try:
        tls = tls_config(Path(web)) if web else None
    except WebConfigError as exc:
        return f"web configuration {web}: {'; '.join(exc.errors)}"
    try:
        if tls is None:
            with urllib.request.urlopen(f"http://{where}/healthz", timeout=TIMEOUT) as resp:
                status = resp.status
        else:
            with _context(tls) as ctx, urllib.request.urlopen(
                    f"https://{where}/healthz", timeout=TIMEOUT, context=ctx) as resp:
                status = resp.status
    except urllib.error.HTTPError as exc:
        return f"{where}/healthz answered {exc.code}"
    except (OSError, ssl.SSLError, ValueError) as exc:
        return f"{where}/healthz: {exc}"
    return None if status == 200 else f"{where}/healthz answered {status}"


def main() -> int:
    problem = check(os.environ)
    if problem is not None:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
