"""POST /restore/events: body model and token file (the check: exporter/web/auth.py)."""

from __future__ import annotations

from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict, Field

from exporter.restore.model import EventKind

log = structlog.get_logger("helios_exporter.app")

MAX_BODY_BYTES = 4096
EVENT_RETRY_AFTER = "1"  # seconds, on a 503: the next poll cycle retries the write too


class RestoreEventIn(BaseModel):
    # Unknown fields are ignored (a newer tool may send more); ids are any 1-64 characters
    # without control characters (they are logged, and JSON-escaped there).
    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")
    event: EventKind
    note: str | None = Field(default=None, max_length=256)


class RestoreEventOut(BaseModel):
    accepted: bool
    duplicate: bool
    phase: str
    window_open: bool
    window_start: float | None


class RestoreEventRefused(RestoreEventOut):
    detail: str  # why (409: refused; 503: not applied now), and what to do instead


def read_token(path: Path) -> bytes:
    """The token file's content without surrounding whitespace; empty files are refused."""
    token = path.read_bytes().strip()
    if not token:
        raise ValueError(f"{path} is empty")
    return token


class TokenFile:
    """--events-token-file, read again whenever it changes (its inode, size or modification
    time, as a Kubernetes secret's atomic swap or an editor's save changes them), like the web
    configuration: a rotated token is the only one accepted from the next request on. A change
    that leaves no usable token (the file gone, empty, unreadable) keeps the last good one and
    is logged once: a rotation caught half-way never locks everyone out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._token = read_token(path)  # at start, a clear error (config.py checked it too)
        self._seen = self._signature()
        self._problem = ""

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def current(self) -> bytes:
        seen = self._signature()
        if seen != self._seen:
            self._seen = seen
            try:
                token = read_token(self.path)
            except (OSError, ValueError) as exc:
                problem = getattr(exc, "strerror", None) or str(exc)
                if problem != self._problem:
                    log.error("events_token_unusable", path=str(self.path), error=problem,
                              kept="the last good token")
                self._problem = problem
            else:
                if token != self._token:
                    log.info("events_token_reloaded", path=str(self.path))
                self._token, self._problem = token, ""
        return self._token
