"""The gate of the bearer-token routes (POST /restore/events, POST /experiment/phases): one
sequence of answers for both, so a client handles them alike.

404 without a token file (the route is disabled), 401 without the right `Authorization: Bearer`
token (checked before the body is read), 429 while the client is slowed down for failed tokens
(exporter/web/auth.py: failures are counted by path and logged without the token), 413 for a body
over the limit (the declared length first, then while reading), 422 for a body that is not the
route's model. A 422 names fields and messages only: submitted values are never echoed back.
A body that never arrives whole (the client went away, or was cut off by the read deadline,
exporter/web/protocol.py, which counts it; or its chunked framing was broken) is logged at debug
level: there is nobody left to answer.
"""

from __future__ import annotations

from typing import Any, TypeVar

import structlog
from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.requests import ClientDisconnect

from exporter.restore.events import MAX_BODY_BYTES, TokenFile
from exporter.web.auth import AuthFailures, bearer_denied

M = TypeVar("M", bound=BaseModel)
log = structlog.get_logger("helios_exporter.app")


async def gated_body(request: Request, token: TokenFile | bytes | None, model: type[M],
                     disabled: str,
                     failures: AuthFailures, path: str,
                     max_bytes: int = MAX_BODY_BYTES) -> M | JSONResponse:
    """The request's body as `model`, or the error response to send instead. `path`: the
    route's own path (one of exporter.labels.AUTH_PATHS), the label its failures are counted
    under."""
    if token is None:
        return JSONResponse({"detail": disabled}, status_code=404)
    secret = token.current() if isinstance(token, TokenFile) else token  # re-read on change
    denied = bearer_denied(request, secret, failures, path)
    if denied is not None:
        return denied
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
        return JSONResponse({"detail": f"body over {max_bytes} bytes"}, status_code=413)
    body = b""
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_bytes:
                return JSONResponse({"detail": f"body over {max_bytes} bytes"}, status_code=413)
    except ClientDisconnect:
        log.debug("request_body_incomplete", path=path, received_bytes=len(body),
                  client=request.client.host if request.client else None)
        # Never sent: the connection is gone.
        return JSONResponse({"detail": "the request body did not arrive"}, status_code=400)
    try:
        return model.model_validate_json(body)
    except ValueError as exc:
        errors: list[dict[str, Any]] = list(getattr(exc, "errors", list)())
        # An unknown key is submitted text too: name only the model's own fields.
        detail = [{"loc": [p if p in model.model_fields else "(extra field)"
                           for p in e.get("loc", ())], "msg": e.get("msg", "")}
                  for e in errors]
        return JSONResponse({"detail": detail or "invalid JSON body"}, status_code=422)
