"""A `serve` process with a web configuration, reached over TLS (tools.harness waits on plain
HTTP, so the wait is here), and TLS clients for it."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx

from tools.harness import Proc, Procs, free_port, wait_until
from tools.pki import Issued


def client_context(ca: Path | None, client: Issued | None = None,
                   check_hostname: bool = True) -> ssl.SSLContext:
    """Trusting `ca` (None: the system store, which does not know the test CA), presenting
    `client`'s certificate when given. `check_hostname` off: for a certificate made out to a
    name, reached at 127.0.0.1 (the chain is still verified)."""
    ctx = ssl.create_default_context(cafile=str(ca) if ca else None)
    ctx.check_hostname = check_hostname
    if client is not None:
        ctx.load_cert_chain(str(client.cert), str(client.key))
    return ctx


def tls_sidecar(procs: Procs, web_config: Path, ca: Path, *extra: str,
                client: Issued | None = None, name: str = "sidecar",
                check_hostname: bool = True) -> tuple[Proc, str]:
    """The sidecar serving https://127.0.0.1:PORT; waits for /readyz (open under basic auth)."""
    proc, url = procs.sidecar(f"http://127.0.0.1:{free_port()}", "--poll-interval", "0.3",
                              "--web-config-file", str(web_config), *extra, name=name, wait=False)
    https = url.replace("http://", "https://")
    verify = client_context(ca, client, check_hostname)
    wait_until(lambda: httpx.get(https + "/readyz", verify=verify, timeout=2).status_code == 200,
               procs.ready_timeout, f"{https}/readyz", proc)
    return proc, https


def logged_errors(proc: Proc) -> list[str]:
    """The sidecar's error lines (JSON logs), e.g. a traceback from a connection it mishandled."""
    return [line for line in proc.log.read_text(errors="replace").splitlines()
            if '"level": "error"' in line or "Traceback" in line]
