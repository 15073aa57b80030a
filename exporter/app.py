"""The HTTP app: it only serves what the poll loop last published (its `View`).

/metrics renders (and gzips) once per published view (a poll cycle or a restore event) and serves
those bytes to every scraper (exporter/collectors/exposition.py). Basic auth, when configured, wraps the app
(exporter/web/guard.py); the bearer-token routes check their token through exporter/web/bearer.py,
which counts and slows down failures (exporter/web/auth.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.openmetrics import exposition as openmetrics

from exporter.collectors.exposition import ExpositionCache, wants_gzip, wants_openmetrics
from exporter.cycle.loop import PollLoop
from exporter.oncall.html import HEADERS as PAGE_HEADERS
from exporter.phases.book import PhaseBook
from exporter.phases.routes import add_phase_routes
from exporter.restore.events import (
    EVENT_RETRY_AFTER,
    RestoreEventIn,
    RestoreEventOut,
    RestoreEventRefused,
    TokenFile,
)
from exporter.version import VERSION
from exporter.web.auth import AuthFailures
from exporter.web.bearer import gated_body
from exporter.web.head import HeadAsGet

log = structlog.get_logger("helios_exporter.app")
audit = structlog.get_logger("helios_exporter.audit")


# Caches between the scraper and the sidecar must keep the two encodings apart.
_IDENTITY = {"Vary": "Accept-Encoding"}
_GZIP = {"Vary": "Accept-Encoding", "Content-Encoding": "gzip"}


def build_app(
    loop: PollLoop,
    cache: ExpositionCache,
    status: Callable[[], dict[str, Any]],
    events_token: TokenFile | bytes | None,
    phases: PhaseBook | None = None,
    page: Callable[[], str] | None = None,
    *,
    auth_failures: AuthFailures | None = None,
    stale_after: float | None = None,
) -> FastAPI:
    """`phases`: the experiment phase book (POST/GET /experiment/phases, same token as the
    events API); without it those routes do not exist. `page` renders the on-call page at `/`
    (not served when None). `auth_failures` counts and slows down failed credentials (one per
    sidecar: every route that checks credentials shares it). `stale_after`: /healthz answers 503
    once no poll cycle has completed for that many seconds (None: never)."""
    failures = auth_failures if auth_failures is not None else AuthFailures()
    # No API documentation served (no /openapi.json, /docs, /redoc: docs/interface.md is the
    # reference; `app.openapi()` still builds the schema for tests). No trailing-slash redirect:
    # Starlette builds its Location from the request's Host header, which a client chooses.
    app = FastAPI(title="helios-exporter", version=VERSION, docs_url=None, redoc_url=None,
                  openapi_url=None, redirect_slashes=False)
    app.add_middleware(HeadAsGet)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Field locations and messages only: never echo the submitted values back.
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        om = wants_openmetrics(request.headers.get("accept"))
        gz = wants_gzip(request.headers.get("accept-encoding"))
        ctype = openmetrics.CONTENT_TYPE_LATEST if om else CONTENT_TYPE_PLAIN_0_0_4
        return Response(cache.render(om, gz), media_type=ctype,
                        headers=_GZIP if gz else _IDENTITY)

    @app.get("/healthz")
    async def healthz() -> Response:
        # Liveness: the process answers and its poll loop goes on. Nothing here waits: one
        # reading of a monotonic clock against the loop's last completed cycle.
        quiet = loop.since_last_cycle()
        if stale_after is not None and quiet > stale_after:
            return JSONResponse({"status": "stale", "seconds_since_last_poll_cycle": round(quiet, 3),
                                 "stale_after_seconds": stale_after}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> Response:
        view = loop.view
        if view.ready:
            return JSONResponse({"status": "ready", "cycles": view.cycles})
        return JSONResponse({"status": "waiting for the first poll cycle"}, status_code=503)

    @app.get("/status")
    async def status_endpoint() -> dict[str, Any]:
        return status()

    if page is not None:
        render = page

        @app.get("/", response_class=HTMLResponse)
        async def status_page() -> HTMLResponse:
            """The on-call page: /status as one self-contained HTML page (docs/status-page.md)."""
            return HTMLResponse(render(), headers=PAGE_HEADERS)

    @app.post(
        "/restore/events",
        response_model=RestoreEventOut,
        responses={401: {"description": "missing or wrong bearer token"},
                   404: {"description": "events endpoint disabled (no --events-token-file)"},
                   409: {"model": RestoreEventRefused,
                         "description": "refused: the event would change nothing in this state "
                                        "(docs/restore.md, every event in every state); the id "
                                        "is not recorded"},
                   429: {"description": "too many failed tokens from this client; see "
                                        "Retry-After"},
                   413: {"description": "body too large"},
                   503: {"model": RestoreEventRefused,
                         "description": "not applied now (the state could not be written, or "
                                        "the state file cannot be read): nothing changed and "
                                        "the id is not used; retry after Retry-After"},
                   422: {"description": "body is not a valid event (values are never echoed)"}},
        # The handler reads the raw body itself (size limit first), so FastAPI cannot infer it:
        # declare it, for clients and for schema-driven tests.
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": RestoreEventIn.model_json_schema()}}}},
    )
    async def restore_event(request: Request) -> Response:
        event = await gated_body(request, events_token, RestoreEventIn,
                                 "events endpoint disabled: no --events-token-file",
                                 failures, "/restore/events")
        if isinstance(event, JSONResponse):
            return event
        duplicate, state, refused, unavailable = await loop.keeper.apply_event(event.id,
                                                                                event.event)
        audit.info("restore_event", event_id=event.id, restore_event=event.event,
                   duplicate=duplicate, refused=refused, unavailable=unavailable, note=event.note,
                   phase=state.phase, client=request.client.host if request.client else None)
        out = RestoreEventOut(
            accepted=not duplicate and refused is None and unavailable is None,
            duplicate=duplicate,
            phase=state.phase,
            window_open=state.window is not None,
            window_start=state.window.start if state.window else None,
        )
        if unavailable is not None:  # not applied, nothing changed: the same id applies later
            return JSONResponse({**out.model_dump(), "detail": unavailable}, status_code=503,
                                headers={"Retry-After": EVENT_RETRY_AFTER})
        if refused is not None:
            return JSONResponse({**out.model_dump(), "detail": refused}, status_code=409)
        return JSONResponse(out.model_dump())

    if phases is not None:
        add_phase_routes(app, phases, events_token, failures)
    return app
