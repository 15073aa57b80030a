"""The sidecar's experiment API from the command line: `phase`, `probe` and `evidence` use it.

Two credentials travel separately, because one request carries one Authorization header: the
bearer token of `--token-file` on `POST /experiment/phases` (and on `GET` when given: the sidecar
guards both with it), and basic auth (`--user`, `--password-file`, when the sidecar's web
configuration asks for it) on `GET /experiment/phases` without a token. TLS comes from
`--ca-file` / `--insecure` (lab/client/access.py).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import httpx

from exporter.restore.events import read_token
from exporter.version import USER_AGENT
from lab.client import access

BEARER_REFUSED = "check --token-file: it must hold the sidecar's --events-token-file token"


class SidecarError(Exception):
    """The sidecar refused or could not be reached; the message says what to do."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SidecarClient:
    def __init__(self, http: httpx.Client, base_url: str, token_file: Path | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http
        self._bearer: dict[str, str] = {}
        if token_file is not None:
            try:
                self._bearer["Authorization"] = "Bearer " + read_token(token_file).decode()
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                http.close()
                raise SidecarError(f"token file {token_file}: {exc}") from None

    def close(self) -> None:
        self._http.close()

    def phase(self, action: str, name: str, note: str | None = None, *,
              retries: int = 0, retry_wait: float = 1.0) -> dict[str, Any]:
        """Begin or end a phase; the sidecar's answer. 503 (no fresh capture) and connection
        errors are retried `retries` times; anything else raises SidecarError at once."""
        body = {"name": name, "action": action, "note": note}
        for attempt in range(retries + 1):
            try:
                # httpx.Auth(): no basic auth here, it would replace the bearer header.
                resp = self._http.post(self.base_url + "/experiment/phases", json=body,
                                       headers=self._bearer, auth=httpx.Auth())
            except httpx.HTTPError as exc:
                error = SidecarError(f"cannot reach {self.base_url}: {access.why(exc)}")
            else:
                if resp.status_code == 200:
                    return _json(resp, "capture")
                error = SidecarError(_explain(resp), resp.status_code)
                if resp.status_code != 503:
                    raise error
            if attempt < retries:
                time.sleep(retry_wait)
        raise error

    def phases(self) -> list[dict[str, Any]]:
        try:
            # With a token the sidecar guards GET with it too (its basic auth steps aside).
            resp = (self._http.get(self.base_url + "/experiment/phases", headers=self._bearer,
                                   auth=httpx.Auth()) if self._bearer
                    else self._http.get(self.base_url + "/experiment/phases"))
        except httpx.HTTPError as exc:
            raise SidecarError(f"cannot reach {self.base_url}: {access.why(exc)}") from None
        if resp.status_code != 200:
            raise SidecarError(_explain(resp), resp.status_code)
        phases = _json(resp, "phases").get("phases")
        if not isinstance(phases, list) or not all(isinstance(p, dict) for p in phases):
            raise SidecarError(f"{resp.url} did not answer with a phases list (is it a "
                               "helios-exporter sidecar?)")
        return phases

    def status(self) -> dict[str, Any]:
        """GET /status (the engine kind the sidecar reads, lab/probe/engine_verdicts.py)."""
        try:
            resp = self._http.get(self.base_url + "/status")
        except httpx.HTTPError as exc:
            raise SidecarError(f"cannot reach {self.base_url}: {access.why(exc)}") from None
        if resp.status_code != 200:
            raise SidecarError(_explain(resp), resp.status_code)
        return _json(resp, "status")


def connect(args: argparse.Namespace, token_file: Path | None = None, timeout: float = 30.0,
            transport: httpx.BaseTransport | None = None) -> SidecarClient:
    """The client of a command's `--sidecar` and access flags; SidecarError when the flags or
    the token file cannot be used (nothing was sent)."""
    base = args.sidecar.strip()
    if "://" not in base:
        base = "http://" + base
    try:
        http = access.client(args, timeout=timeout, user_agent=USER_AGENT, transport=transport)
    except access.AccessError as exc:
        raise SidecarError(str(exc)) from None
    return SidecarClient(http, base, token_file)


def _json(resp: httpx.Response, what: str) -> dict[str, Any]:
    answer = access.json_object(resp)
    if answer is None:
        raise SidecarError(f"{resp.url} answered 200 without the {what} JSON (is it a "
                           "helios-exporter sidecar?)")
    return answer


def _explain(resp: httpx.Response) -> str:
    try:
        body = resp.json()
        detail = body.get("detail") if isinstance(body, dict) else body
    except ValueError:
        detail = " ".join(resp.text[:200].split())
    if resp.status_code == 401:
        # The scheme the sidecar asks for says which credential it refused.
        scheme = resp.headers.get("www-authenticate", "").split(" ")[0].lower()
        hint = (access.basic_auth_refused(resp) if scheme == "basic" else BEARER_REFUSED)
        hint = f" ({hint})"
    else:
        hint = {
            404: (" (is this a helios-exporter sidecar started with --events-token-file?)"
                  if resp.request.method == "POST" else
                  " (is this a helios-exporter sidecar, version 2 or later?)"),
            429: " (too many failed credentials from this host: wait, then check them)",
            503: " (the sidecar could not poll the engine or store the phase; nothing changed)",
        }.get(resp.status_code, "")
    return f"{resp.request.method} {resp.url.path} answered {resp.status_code}: {detail}{hint}"
