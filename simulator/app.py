"""HTTP face of the simulated engine: docs/interface.md section 1 plus ``/admin/`` endpoints for outages.

While the engine is down (``POST /admin/crash``) every endpoint outside ``/admin/`` answers 503
without a snapshot, as a stopped container behind a proxy would; ``POST /admin/restart`` brings a
new incarnation back. ``POST /admin/trace`` switches the observer that ``observer-cost`` measures;
``POST /admin/fault`` arms a one-shot fault in the request path (simulator.faults).

``POST /v1/completions`` answers as the simulated model would (simulator.outputs): its own
length unless the body fixes it (``ignore_eos``, ``min_tokens``), ``usage.completion_tokens``
as generated, and ``system_fingerprint`` ``helios-simulator`` so that evidence of it can say it
was simulated. With an API key (``--api-key-file``, as vLLM's ``--api-key``) it asks for
``Authorization: Bearer <key>`` (401 without it); the rest of the engine's paths stay open.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field, model_validator
from starlette.middleware.base import RequestResponseEndpoint

from simulator import outputs
from simulator.clock import Clock
from simulator.corpora import VOCAB
from simulator.engine import AdmissionState, EngineUnavailable, SimulatedEngine
from simulator.faults import FaultKind, Faults
from simulator.flavors import DEFAULT_FLAVOR, renderer
from simulator.runner import ScenarioRunner
from simulator.scenarios import Scenario

GENERATION_PATTERN = r"^[A-Za-z0-9._:-]{1,64}$"
LABEL_PATTERN = r"^[A-Za-z0-9._:@/+=-]{1,128}$"
CONTAINER_PATTERN = r"^[0-9a-f]{12,64}$"
FINGERPRINT = "helios-simulator"


class CompletionBody(BaseModel):
    model: str | None = None
    prompt: str | list[int]
    max_tokens: Annotated[int, Field(ge=0, le=8192)] = 16
    # vLLM / SGLang sampling parameters that fix the output length.
    min_tokens: Annotated[int, Field(ge=0, le=8192)] = 0
    ignore_eos: bool = False

    @model_validator(mode="after")
    def _min_within_max(self) -> CompletionBody:
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must not exceed max_tokens "
                             f"({self.max_tokens})")
        return self


class AdmissionBody(BaseModel):
    state: AdmissionState


class RestartBody(BaseModel):
    container: Literal["same", "new"] = "same"
    generation: Annotated[str | None, Field(pattern=GENERATION_PATTERN)] = None
    image_digest: Annotated[str | None, Field(pattern=LABEL_PATTERN)] = None
    # Restart in this container (e.g. the retained one, redoing a restore into a new one).
    container_id: Annotated[str | None, Field(pattern=CONTAINER_PATTERN)] = None

    @model_validator(mode="after")
    def _one_container(self) -> RestartBody:
        if self.container_id is not None and self.container == "new":
            raise ValueError("container_id names the container: not with container 'new'")
        return self


class InflightBody(BaseModel):
    count: Annotated[int | None, Field(ge=0)]


class TrafficBody(BaseModel):
    enabled: bool


class TraceBody(BaseModel):
    enabled: Annotated[bool, Field(strict=True)]  # "yes" is not a switch position


class FaultBody(BaseModel):
    kind: FaultKind
    after_requests: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    seconds: Annotated[float, Field(ge=-86_400, le=86_400)] = 0.0  # clock_jump only


def tokenize(prompt: str | list[int]) -> list[int]:
    """One token per whitespace-separated word; a list of ints is taken as token ids."""
    if isinstance(prompt, list):
        return prompt
    return [zlib.crc32(word.encode()) % VOCAB for word in prompt.split()]


def build_app(
    engine: SimulatedEngine,
    *,
    scenario: Scenario | None = None,
    clock: Clock | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    max_request_wait_s: float = 30.0,
    api_key: str | None = None,
    flavor: str = DEFAULT_FLAVOR,
) -> FastAPI:
    """The engine's HTTP app; with a ``scenario``, its lifespan runs the background traffic;
    with an ``api_key``, completions need it as a bearer token; with a ``flavor`` other than
    helios, ``/metrics`` in that engine's shape and no snapshot (simulator.flavors)."""
    clock = clock or engine.clock
    faults = Faults()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = None
        if scenario is not None:
            runner = ScenarioRunner(engine, scenario, clock=clock, sleep=sleep)
            task = asyncio.create_task(runner.run(), name="simulator-scenario")
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app = FastAPI(title="Helios engine simulator", lifespan=lifespan)

    expected = f"Bearer {api_key}".encode() if api_key is not None else None

    @app.middleware("http")
    async def down_gate(request: Request, call_next: RequestResponseEndpoint) -> Response:
        if engine.crashed and not request.url.path.startswith("/admin/"):
            return JSONResponse({"error": "engine down"}, status_code=503)
        if expected is not None and request.url.path.startswith("/v1/") and not \
                hmac.compare_digest(request.headers.get("authorization", "").encode(), expected):
            return JSONResponse({"error": "invalid or missing API key"}, status_code=401)
        engine.poll()
        return await call_next(request)

    def state() -> dict[str, Any]:
        return {
            "crashed": engine.crashed,
            "generation": engine.generation,
            "incarnation": engine.incarnation,
            "started_at": engine.started_at,
            "container_id": engine.container_id,
            "image_digest": engine.image_digest,
            "admission": engine.admission,
            "inflight_requests": engine.inflight,
            "running_requests": engine.running,
            "inflight_override": engine.inflight_override,
            "scenario": scenario.describe() if scenario is not None else None,
            "trace": {"enabled": engine.trace_enabled, "cost": engine.config.trace_cost},
            "faults": faults.describe(),
        }

    render = renderer(flavor, engine)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/debug/offload/snapshot")
    async def snapshot() -> dict[str, Any]:
        if flavor != DEFAULT_FLAVOR:
            raise HTTPException(404, f"no snapshot: the {flavor} flavor has none, as that "
                                     "engine has none")
        return engine.snapshot()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "admission": engine.admission, "generation": engine.generation}

    @app.post("/v1/completions")
    async def completions(body: CompletionBody) -> dict[str, Any]:
        tokens = tokenize(body.prompt)
        model = body.model or engine.config.model_name
        checkpoint = engine.config.checkpoint
        n, finish = outputs.length(checkpoint, model, tokens, body.max_tokens, body.min_tokens,
                                   body.ignore_eos, engine.config.early_stop)
        fail_stores = False
        for kind, seconds in faults.next_request():
            if kind == "restart":
                engine.restart("same")
            elif kind == "drop":
                raise HTTPException(500, "request dropped by the engine (simulated fault)")
            elif kind == "short":
                n, finish = n // 2, "stop"
            elif kind == "clock_jump":
                engine.wall_offset += seconds
            elif kind == "rank_lost" and engine.config.num_ranks:
                engine.lost_ranks.add(engine.config.num_ranks - 1)
            elif kind == "store_fail":
                fail_stores = True
        try:  # decode time follows n
            running = engine.submit(tokens, n, body.model, fail_stores=fail_stores)
        except EngineUnavailable as exc:
            raise HTTPException(503, f"engine unavailable: {exc}") from exc
        await sleep(min(max(0.0, running.finish_at - clock()), max_request_wait_s))
        engine.finish(running)
        if not running.finished:
            raise HTTPException(503, "engine went down while the request ran")
        return {
            "id": running.request_id,
            "object": "text_completion",
            "created": int(running.started_at),
            "model": model,
            "system_fingerprint": FINGERPRINT,
            "choices": [{"text": outputs.text(checkpoint, model, tokens, n), "index": 0,
                         "finish_reason": finish}],
            "usage": {
                "prompt_tokens": len(tokens),
                "completion_tokens": n,
                "total_tokens": len(tokens) + n,
            },
        }

    @app.get("/admin/state")
    async def admin_state() -> dict[str, Any]:
        return state()

    @app.post("/admin/admission")
    async def admin_admission(body: AdmissionBody) -> dict[str, Any]:
        engine.set_admission(body.state)
        return state()

    @app.post("/admin/crash")
    async def admin_crash() -> dict[str, Any]:
        engine.crash()
        return state()

    @app.post("/admin/restart")
    async def admin_restart(body: RestartBody) -> dict[str, Any]:
        engine.restart(body.container, generation=body.generation, image_digest=body.image_digest,
                       container_id=body.container_id)
        return state()

    @app.post("/admin/inflight")
    async def admin_inflight(body: InflightBody) -> dict[str, Any]:
        engine.inflight_override = body.count
        return state()

    @app.post("/admin/trace")
    async def admin_trace(body: TraceBody) -> dict[str, Any]:
        engine.trace_enabled = body.enabled
        return state()

    @app.post("/admin/fault")
    async def admin_fault(body: FaultBody) -> dict[str, Any]:
        faults.arm(body.kind, body.after_requests, body.seconds)
        return state()

    @app.post("/admin/traffic")
    async def admin_traffic(body: TrafficBody) -> dict[str, Any]:
        if scenario is None:
            raise HTTPException(409, "no scenario runs in this app")
        scenario.traffic_enabled = body.enabled
        return state()

    return app
