"""A real `/status`, rendered by a real sidecar (exporter.sidecar.build with the engine behind an
in-memory transport) after the story the restore runbooks are about: a restore into the wrong
container with requests lost, then a redo that is under way (window open, a restored engine
warming up). Every field the runbooks send on-call to read is there, nested objects filled."""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from exporter.app import build_app
from exporter.config import Config
from exporter.sidecar import build
from tests.helpers import StubEngine, contract_example

TOKEN = "runbook-sample-token-0123456789abcdef"
START = 1_764_389_520.0


def _engine_at(engine: StubEngine, generation: str, container: str, admission: str,
               inflight: int) -> None:
    """The engine up with a contract-shaped snapshot of this generation, container, admission."""
    snap = copy.deepcopy(contract_example())
    snap["generation"] = generation
    snap["identity"]["container_id"] = container
    snap["admission"] = {"state": admission, "inflight_requests": inflight}
    engine.snapshot, engine.down = snap, False


@dataclass(frozen=True)
class Rendered:
    status: dict[str, Any]                # GET /status
    event_answer: dict[str, Any]          # POST /restore/events, accepted
    routes: frozenset[tuple[str, str]]    # (method, path) the app serves


def render(state_dir: Path) -> Rendered:
    """GET /status of a sidecar driven through the story, as the endpoint serves it, and the
    answer to an accepted event."""
    engine = StubEngine(metrics="# EOF\n")  # down (connection refused) until the story starts
    engine.down = True
    token_file = state_dir.parent / "events-token"
    token_file.write_text(TOKEN + "\n")
    snap = contract_example()
    now = [START]
    config = Config(engine_url="http://engine.test", state_dir=state_dir, no_nvml=True,
                    request_cutoff=100.0, restore_bound=200.0, down_grace=10.0,
                    events_token_file=token_file,
                    expect_image_digest=snap["identity"]["image_digest"],
                    expect_checkpoint="another-checkpoint", expect_ranks=len(snap["ranks"]))
    sidecar = build(config, transport=httpx.MockTransport(engine), clock=lambda: now[0])
    app = build_app(sidecar.loop, sidecar.cache, sidecar.status, sidecar.events_token,
                    sidecar.phases)
    story: list[tuple[float, tuple[str, str, str, int] | None]] = [
        (0, ("g1", "c-incumbent", "open", 3)),
        (5, ("g1", "c-incumbent", "closed", 2)),   # drain: the window opens
        (10, None), (30, None),                     # down
        (40, ("g2", "c-wrong", "open", 0)),         # back in another container: checks fail
        (50, ("g2", "c-wrong", "open", 1)),
        (60, ("g2", "c-wrong", "draining", 1)),     # the redo: a new window
        (70, None), (90, None),
        (100, ("g3", "c-incumbent", "closed", 0)),  # the retained container warming up
    ]

    async def go() -> Rendered:
        for at, engine_state in story:
            now[0] = START + at
            if engine_state is None:
                engine.down = True
            else:
                _engine_at(engine, *engine_state)
            await sidecar.loop.cycle()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://sidecar") as client:
            response = await client.get("/status")
            response.raise_for_status()
            event = await client.post("/restore/events", headers={"Authorization": f"Bearer {TOKEN}"},
                                      json={"id": "restore-1", "event": "restore_started"})
            event.raise_for_status()
        routes = frozenset((method, route.path) for route in app.routes
                           for method in getattr(route, "methods", None) or ()
                           if method != "HEAD" and not route.path.startswith(("/openapi", "/docs")))
        return Rendered(response.json(), event.json(), routes)

    try:
        return asyncio.run(go())
    finally:
        sidecar.close()


def without_nulls(doc: Any, sentinel: str) -> Any:
    """`doc` with every null replaced by `sentinel`: a jq filter that then still prints null read
    a field the document does not have."""
    if doc is None:
        return sentinel
    if isinstance(doc, dict):
        return {k: without_nulls(v, sentinel) for k, v in doc.items()}
    if isinstance(doc, list):
        return [without_nulls(v, sentinel) for v in doc]
    return doc


if __name__ == "__main__":  # a look at the sample
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "state").mkdir()
        rendered = render(Path(tmp) / "state")
        print(json.dumps(rendered.status, indent=1), rendered.event_answer, sorted(rendered.routes))
