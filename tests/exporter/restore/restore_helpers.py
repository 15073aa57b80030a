"""Shared builders for the restore-window tests (snapshots from contract-shaped dicts)."""

from __future__ import annotations

from typing import Any

from exporter.restore.window import Bounds, Event, Input, Poll, Preflight, RestoreState, step
from exporter.snapshot.model import Snapshot
from exporter.snapshot.parse import snapshot_from_obj
from tools.harness import StubEngine

BOUNDS = Bounds(request_cutoff=100.0, restore_bound=200.0, down_grace=10.0)
PREFLIGHT_BOUNDS = Bounds(request_cutoff=100.0, restore_bound=200.0, down_grace=10.0,
                          preflight=("direct", "routed"))


def snap(
    generation: str = "g1",
    admission: str | None = "open",
    inflight: int | None = 0,
    image: str | None = "sha256:aaa",
    container: str | None = "c1",
    started_at: float | None = None,
    package: str | None = None,
    checkpoint: str | None = None,
) -> Snapshot:
    obj: dict[str, Any] = {"schema_version": 1, "generation": generation}
    if started_at is not None:
        obj["started_at"] = started_at
    ident = {k: v for k, v in (("image_digest", image), ("container_id", container),
                               ("package", package), ("checkpoint", checkpoint)) if v is not None}
    if ident:
        obj["identity"] = ident
    if admission is not None:
        adm: dict[str, Any] = {"state": admission}
        if inflight is not None:
            adm["inflight_requests"] = inflight
        obj["admission"] = adm
    return snapshot_from_obj(obj)


def poll(at: float, *args: Any, **kwargs: Any) -> Poll:
    return Poll(at, snap(*args, **kwargs))


def fail(at: float) -> Poll:
    return Poll(at, None)


def event(at: float, kind: str, id_: str | None = None) -> Event:
    return Event(at, id_ or f"{kind}-{at}", kind)  # type: ignore[arg-type]


def pf(at: float, probe: str, ok: bool = True) -> Preflight:
    return Preflight(at, probe, ok)


def run(inputs: list[Input], bounds: Bounds = BOUNDS,
        state: RestoreState | None = None) -> list[RestoreState]:
    """Every state after each input, in order."""
    out: list[RestoreState] = []
    s = state if state is not None else RestoreState()
    for inp in inputs:
        s = step(s, inp, bounds)
        out.append(s)
    return out


def final(inputs: list[Input], bounds: Bounds = BOUNDS,
          state: RestoreState | None = None) -> RestoreState:
    return run(inputs, bounds, state)[-1]


def restart(state: RestoreState) -> RestoreState:
    """The sidecar restarts: its state goes through the state file."""
    from exporter.restore import store

    return store.decode(store.encode(state))


# -- a sidecar against a mock engine ---------------------------------------------------------------

class MockEngine(StubEngine):
    """The harness's stub engine with a minimal snapshot (`snapshot_obj()`) and an empty
    /metrics; `down` refuses connections."""

    def __init__(self, snapshot: dict[str, Any] | None = None) -> None:
        super().__init__(snapshot if snapshot is not None else snapshot_obj(), metrics="# EOF\n")


def snapshot_obj(generation: str = "g1", admission: str = "open", inflight: int = 0,
                 container: str = "c1", image: str = "sha256:aaa") -> dict[str, Any]:
    return {"schema_version": 1, "generation": generation,
            "identity": {"image_digest": image, "container_id": container},
            "admission": {"state": admission, "inflight_requests": inflight}}


def make_sidecar(state_dir: Any, engine: Any = None, clock: Any = None, **config: Any) -> Any:
    """exporter.sidecar.build with the engine behind a MockTransport (and an optional clock)."""
    import time

    import httpx

    from exporter.config import Config
    from exporter.sidecar import build

    cfg = Config(engine_url="http://engine.test", state_dir=state_dir, no_nvml=True,
                 request_cutoff=100.0, restore_bound=200.0, down_grace=10.0, **config)
    return build(cfg, transport=httpx.MockTransport(engine or MockEngine()),
                 clock=clock or time.time)


def open_window_state() -> RestoreState:
    """A window opened by a drain at a start with sub-millisecond digits, incumbent known."""
    return final([poll(1764389520.123456, inflight=3),
                  poll(1764389525.987654321, admission="draining", inflight=2),
                  event(1764389526.5, "restore_started", "ev-1")])


def closed_window_state() -> RestoreState:
    return final([poll(0, inflight=1), poll(10, admission="closed", inflight=0), fail(20),
                  fail(40), poll(50, generation="g2")])
