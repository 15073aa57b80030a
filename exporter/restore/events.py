"""POST /restore/events: body model and token file (the check: exporter/web/auth.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_BODY_BYTES = 4096


class RestoreEventIn(BaseModel):
    # Unknown fields are ignored (a newer tool may send more); ids are any 1-64 characters
    # without control characters (they are logged, and JSON-escaped there).
    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")
    event: Literal["drain_started", "restore_started", "window_closed", "abort"]
    note: str | None = Field(default=None, max_length=256)


class RestoreEventOut(BaseModel):
    accepted: bool
    duplicate: bool
    phase: str
    window_open: bool
    window_start: float | None
    persisted: bool  # false: the state file could not be written (see /status); retry later


class RestoreEventRefused(RestoreEventOut):
    detail: str  # why, and what to do instead


def read_token(path: Path) -> bytes:
    """The token file's content without surrounding whitespace; empty files are refused."""
    token = path.read_bytes().strip()
    if not token:
        raise ValueError(f"{path} is empty")
    return token
