"""The sidecar's experiment API from the command line: `phase`, `probe` and `evidence` use it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from exporter.restore.events import read_token


class SidecarError(Exception):
    """The sidecar refused or could not be reached; the message says what to do."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SidecarClient:
    def __init__(self, base_url: str, token_file: Path | None = None, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"User-Agent": "helios-exporter/0.1"}
        if token_file is not None:
            try:
                headers["Authorization"] = "Bearer " + read_token(token_file).decode()
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                raise SidecarError(f"token file {token_file}: {exc}") from None
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                    transport=transport)

    def close(self) -> None:
        self._client.close()

    def phase(self, action: str, name: str, note: str | None = None, *,
              retries: int = 0, retry_wait: float = 1.0) -> dict[str, Any]:
        """Begin or end a phase; the sidecar's answer. 503 (no fresh capture) and connection
        errors are retried `retries` times; anything else raises SidecarError at once."""
        body = {"name": name, "action": action, "note": note}
        for attempt in range(retries + 1):
            try:
                resp = self._client.post("/experiment/phases", json=body)
            except httpx.HTTPError as exc:
                error = SidecarError(f"{self.base_url}: {type(exc).__name__}: {exc}")
            else:
                if resp.status_code == 200:
                    answer: dict[str, Any] = resp.json()
                    return answer
                error = SidecarError(_explain(resp), resp.status_code)
                if resp.status_code != 503:
                    raise error
            if attempt < retries:
                time.sleep(retry_wait)
        raise error

    def phases(self) -> list[dict[str, Any]]:
        try:
            resp = self._client.get("/experiment/phases")
        except httpx.HTTPError as exc:
            raise SidecarError(f"{self.base_url}: {type(exc).__name__}: {exc}") from None
        if resp.status_code != 200:
            raise SidecarError(_explain(resp), resp.status_code)
        phases: list[dict[str, Any]] = resp.json()["phases"]
        return phases


def _explain(resp: httpx.Response) -> str:
    try:
        detail = resp.json().get("detail")
    except ValueError:
        detail = resp.text[:200]
    hint = {
        401: " (check --token-file: it must hold the sidecar's --events-token-file token)",
        404: " (is this a helios-exporter sidecar started with --events-token-file?)",
        409: "",
        503: " (the sidecar could not poll the engine or store the phase; nothing changed)",
    }.get(resp.status_code, "")
    return f"sidecar answered {resp.status_code}: {detail}{hint}"
