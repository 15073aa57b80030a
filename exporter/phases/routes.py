"""POST and GET /experiment/phases (docs/interface.md section 7).

POST has the events API's gate (exporter/web/bearer.py: 404, 401, 429, 413, 422), then 409 for a name
conflict, 503 when no fresh capture could be taken or stored (nothing changed: retry), and 200
with the capture just taken and the phase as it now stands. GET needs the same bearer token when
the token is configured (401, 429), answers 503 while the phases file cannot be read, and
otherwise serves the bytes the book made at its last change.
"""

from __future__ import annotations

from typing import Literal

import structlog
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from exporter.labels import PHASE_NAME_PATTERN
from exporter.phases.book import PhaseBook, PhaseConflict, PhaseUnavailable, phase_json
from exporter.phases.capture import to_json
from exporter.restore.events import TokenFile
from exporter.web.auth import AuthFailures, bearer_denied
from exporter.web.bearer import gated_body

audit = structlog.get_logger("helios_exporter.audit")


class PhaseIn(BaseModel):
    model_config = ConfigDict(extra="ignore")  # as the events API: a newer client may send more

    name: str = Field(pattern=PHASE_NAME_PATTERN, description="1-64 of A-Z a-z 0-9 . _ / -")
    action: Literal["begin", "end"]
    note: str | None = Field(default=None, max_length=256)


def add_phase_routes(app: FastAPI, book: PhaseBook, token: TokenFile | bytes | None,
                     failures: AuthFailures) -> None:
    @app.post(
        "/experiment/phases",
        responses={401: {"description": "missing or wrong bearer token"},
                   404: {"description": "disabled (no --events-token-file)"},
                   429: {"description": "too many failed tokens from this client; see "
                                        "Retry-After"},
                   409: {"description": "begin of an existing name, end of a phase not open, "
                                        "or too many phases open"},
                   413: {"description": "body too large"},
                   422: {"description": "body is not a valid phase action (values are never "
                                        "echoed)"},
                   503: {"description": "no fresh capture (engine unreachable) or the phases "
                                        "file could not be written; nothing changed"}},
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": PhaseIn.model_json_schema()}}}},
    )
    async def phase_action(request: Request) -> Response:
        body = await gated_body(request, token, PhaseIn,
                                "phases endpoint disabled: no --events-token-file",
                                failures, "/experiment/phases")
        if isinstance(body, JSONResponse):
            return body
        action = book.begin if body.action == "begin" else book.end
        try:
            phase = await action(body.name, body.note)
        except PhaseConflict as exc:
            return JSONResponse({"detail": str(exc)}, status_code=409)
        except PhaseUnavailable as exc:
            return JSONResponse({"detail": str(exc)}, status_code=503,
                                headers={"Retry-After": "1"})
        captured = phase.begin if body.action == "begin" else phase.end
        assert captured is not None
        shown = phase_json(phase)
        audit.info("experiment_phase", phase=body.name, action=body.action, note=body.note,
                   generation=captured.generation, valid=shown["valid"],
                   client=request.client.host if request.client else None)
        return JSONResponse({"action": body.action, "capture": to_json(captured), "phase": shown})

    @app.get("/experiment/phases")
    async def phases(request: Request) -> Response:
        if token is not None:  # the events token guards reading the book too
            secret = token.current() if isinstance(token, TokenFile) else token
            denied = bearer_denied(request, secret, failures, "/experiment/phases")
            if denied is not None:
                return denied
        if book.unreadable is not None:  # never an empty book in place of one not read
            return JSONResponse({"detail": book.unreadable + " (not overwritten)"},
                                status_code=503, headers={"Retry-After": "1"})
        # Made once per change of the book (exporter/phases/rendered.py), served as is.
        return Response(book.answer(), media_type="application/json")
