"""A simulated Helios engine incarnation: identity, admission, requests and the offload tier.

Time comes only from the injected clock and randomness only from the seeded generator, so a test
that drives a ``ManualClock`` sees the same run every time. Nothing here sleeps: ``submit`` starts
a request, ``poll`` completes the asynchronous host stores and the requests that are due.
"""

from __future__ import annotations

import hashlib
import heapq
import random
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import structlog

from simulator.clock import Clock, wall_clock
from simulator.config import SNAPSHOT_VERSIONS, EngineConfig
from simulator.index import PrefixIndex
from simulator.metrics import EngineMetrics
from simulator.slabs import SlabPool
from simulator.stats import TierStats, closed_reason

AdmissionState = Literal["open", "draining", "closed"]
ENGINE = "helios-simulator"  # identity.engine (v3): what answers, so evidence says SIMULATED
ADMISSION_STATES: tuple[AdmissionState, ...] = ("open", "draining", "closed")
GENERATION_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")
CONTAINER_RE = re.compile(r"[0-9a-f]{12,64}")  # a container id, short or full

# The configuration is simulator/config.py's; the lab and the tests import it from here too.
__all__ = ["ADMISSION_STATES", "CONTAINER_RE", "ENGINE", "GENERATION_RE", "SNAPSHOT_VERSIONS",
           "AdmissionState", "EngineConfig", "EngineUnavailable", "Request", "SimulatedEngine",
           "new_generation"]

log = structlog.get_logger("simulator.engine")


class EngineUnavailable(Exception):
    """The engine refuses new requests: admission is not open, or it is down."""


@dataclass
class Request:
    request_id: str
    prompt_tokens: int
    max_tokens: int
    started_at: float
    finish_at: float
    tokens: tuple[int, ...]
    # What the latency model says (seconds); finish_at is started_at + latency_s / time_scale.
    latency_s: float
    hit_node: int | None
    reused_tokens: int
    restored_tokens: int
    finished: bool = False


def new_generation(now: float, rng: random.Random) -> str:
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%MZ")
    return f"g-{stamp}-{rng.getrandbits(16):04x}"


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(4 * digits):0{digits}x}"


class SimulatedEngine:
    def __init__(
        self, config: EngineConfig | None = None, *, clock: Clock = wall_clock, seed: int | None = None
    ) -> None:
        self.config = config or EngineConfig()
        self.clock = clock
        self.rng = random.Random(seed)
        self.container_id = self.config.container_id or _hex(self.rng, 12)
        self.image_digest = self.config.image_digest or f"sha256:{_hex(self.rng, 64)}"
        self.ranks = [
            {"rank": r, "gpu_uuid": "GPU-{}-{}-{}-{}-{}".format(*self._uuid_parts())}
            for r in range(self.config.num_ranks)
        ]
        self.generation = ""
        self.incarnation = 0
        # The clocks the snapshot reports (observer-cost's anchors): a process clock that never
        # jumps, and a wall clock that a `clock_jump` fault (simulator.faults) can step.
        self._boot = self.clock()
        self.wall_offset = 0.0
        self._start_incarnation(None)

    def _uuid_parts(self) -> tuple[str, ...]:
        h = _hex(self.rng, 32)
        return h[:8], h[8:12], h[12:16], h[16:20], h[20:]

    def _start_incarnation(self, generation: str | None) -> None:
        now = self.clock()
        if generation is None:
            generation = new_generation(now, self.rng)
            while generation == self.generation:
                generation = new_generation(now, self.rng)
        self.generation = generation
        self.started_at = now
        self.incarnation += 1
        self.admission: AdmissionState = "open"
        self.crashed = False
        self.inflight_override: int | None = None
        self.trace_enabled = False
        self.lost_ranks: set[int] = set()  # ranks a `rank_lost` fault took out of the snapshot
        self.stats = TierStats()
        self.pool = SlabPool(self.config.geometry)
        self.index = PrefixIndex(
            self.pool, self.config.tokens_per_page, self.stats, self.config.retired_memory,
            self.config.checkpoint_interval_tokens // self.config.tokens_per_page,
        )
        self.metrics = EngineMetrics(self.config.model_name, lambda: self.running)
        self._active: dict[str, Request] = {}
        self._stores: list[tuple[float, int, int]] = []
        self._store_seq = 0
        self._failing: set[int] = set()  # stores in flight that a `store_fail` fault will fail
        self._device: deque[tuple[int, ...]] = deque(maxlen=max(1, self.config.device_cache_slots))
        log.info("engine_started", generation=generation, container_id=self.container_id)

    # -- state ------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Requests actually running (what ``helios:num_running_reqs`` shows)."""
        return len(self._active)

    @property
    def inflight(self) -> int:
        """In-flight requests as the snapshot reports them (the admin override wins)."""
        return self.inflight_override if self.inflight_override is not None else self.running

    def key_for(self, model: str | None) -> str:
        """Checkpoint key: entries stored under one key never serve another."""
        material = f"{self.config.checkpoint}|{model or self.config.model_name}"
        return hashlib.sha256(material.encode()).hexdigest()[:16]

    def set_admission(self, state: AdmissionState) -> None:
        if state not in ADMISSION_STATES:
            raise ValueError(f"unknown admission state {state!r}")
        log.info("admission", generation=self.generation, state=state)
        self.admission = state

    def crash(self) -> None:
        """The engine stops serving; host memory and running requests are lost."""
        log.info("engine_down", generation=self.generation)
        self.crashed = True
        self._active.clear()
        self._stores.clear()
        self._failing.clear()

    def restart(
        self,
        container: Literal["same", "new"] = "same",
        generation: str | None = None,
        image_digest: str | None = None,
        container_id: str | None = None,
    ) -> None:
        """A new incarnation: fresh counters, empty host tier, admission open.

        `container_id` restarts in that container, e.g. the retained one after a restore into a
        new one (a redo); it goes with `container="same"` only.
        """
        if generation is not None and not GENERATION_RE.fullmatch(generation):
            raise ValueError(f"generation {generation!r} does not match {GENERATION_RE.pattern}")
        if container not in ("same", "new"):
            raise ValueError(f"container must be 'same' or 'new', got {container!r}")
        if container_id is not None:
            if container == "new":
                raise ValueError("container_id names the container: not with container 'new'")
            if not CONTAINER_RE.fullmatch(container_id):
                raise ValueError(f"container_id {container_id!r} does not match {CONTAINER_RE.pattern}")
            self.container_id = container_id
        if container == "new":
            self.container_id = _hex(self.rng, 12)
        if image_digest is not None:
            self.image_digest = image_digest
        self._start_incarnation(generation)

    # -- requests ---------------------------------------------------------------------------

    def _next_request_id(self) -> str:
        return f"cmpl-{_hex(self.rng, 12)}"

    def _device_reuse(self, tokens: tuple[int, ...]) -> int:
        best = 0
        for other in self._device:
            n = 0
            for a, b in zip(tokens, other, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return min(best, max(0, len(tokens) - 1))

    def checkpoint_depths(self, prompt_tokens: int) -> list[int]:
        """Block boundaries this request stores checkpoints at, shallow first: whole row
        checkpoint intervals, spread evenly over the usable ones."""
        step = self.index.checkpoint_blocks
        intervals = self.index.usable_blocks(prompt_tokens) // step
        n = self.config.stores_per_request
        return sorted({round(intervals * i / n) * step for i in range(1, n + 1)} - {0})

    def submit(
        self, tokens: Sequence[int], max_tokens: int, model: str | None = None,
        *, fail_stores: bool = False,
    ) -> Request:
        """Start a completion that generates ``max_tokens`` tokens: look the prompt up, then
        store its checkpoints asynchronously (with ``fail_stores``, each of them fails)."""
        if self.crashed or self.admission != "open":
            reason = "engine down" if self.crashed else f"admission {self.admission}"
            raise EngineUnavailable(reason)
        if max_tokens < 0:
            raise ValueError("max_tokens must not be negative")
        now = self.clock()
        prompt = tuple(tokens)
        key = self.key_for(model)
        device = self._device_reuse(prompt)
        result = self.index.lookup(key, prompt, now)
        restored = 0
        if result.hit and result.node_id is not None:
            self.index.pin(result.node_id)
            restored = max(0, result.tokens - device)
        reused = device + restored
        stats = self.stats
        stats.tokens_restored += restored
        stats.prompt_tokens_reused += reused
        stats.prompt_computed += len(prompt) - reused
        stats.prompt_gpu_prefix += device
        stats.prompt_host_restored += restored
        if not result.hit and result.reason is not None:
            stats.blocked_tokens[closed_reason(result.reason)] += len(prompt) - device
        if restored:
            nbytes = self._restored_bytes(restored)
            stats.record_restore(nbytes, nbytes / self.config.latency.host_bytes_per_s)
        scale = self.config.time_scale
        depths = self.checkpoint_depths(len(prompt))
        if not depths:  # too short for any checkpoint: the prompt's state cannot be stored
            stats.dropped_ineligible += 1
        for depth in depths:
            node_id = self.index.begin_store(key, prompt, depth, now)
            if node_id is not None:
                due = now + self.rng.uniform(*self.config.store_latency_s) / scale
                self._store_seq += 1
                heapq.heappush(self._stores, (due, self._store_seq, node_id))
                if fail_stores:
                    self._failing.add(node_id)
        latency = self.config.latency.seconds(
            len(prompt) - reused, self._restored_bytes(restored), max_tokens, self.rng,
            1.0 + self.config.trace_cost if self.trace_enabled else 1.0,
        )
        request = Request(
            self._next_request_id(), len(prompt), max_tokens, now, now + latency / scale, prompt,
            latency, result.node_id if result.hit else None, reused, restored,
        )
        self._active[request.request_id] = request
        return request

    def _restored_bytes(self, tokens: int) -> int:
        """Bytes copied from the host to restore ``tokens``: their pages and one row."""
        if tokens <= 0:
            return 0
        geometry = self.pool.geometry
        pages = -(-tokens // self.config.tokens_per_page)
        return pages * geometry.page_record_bytes + geometry.row_record_bytes

    def poll(self) -> None:
        """Complete the host stores and requests that are due by now."""
        now = self.clock()
        while self._stores and self._stores[0][0] <= now:
            due, _, node_id = heapq.heappop(self._stores)
            if node_id in self._failing:
                self._failing.discard(node_id)
                self.index.fail_store(node_id, due)
            else:
                self.index.complete_store(node_id, due)
        for request in [r for r in self._active.values() if r.finish_at <= now]:
            self.finish(request)

    def finish(self, request: Request) -> None:
        """Finish ``request`` now if it is still running in this incarnation."""
        if self._active.pop(request.request_id, None) is None:
            return
        request.finished = True
        if request.hit_node is not None:
            self.index.unpin(request.hit_node)
        self._device.append(request.tokens)
        now = self.clock()
        if now >= request.finish_at:
            latency = request.latency_s
        else:  # cut short (the app stopped waiting): what actually passed, in model time
            latency = max(0.0, now - request.started_at) * self.config.time_scale
        self.metrics.request_finished(
            request.request_id, request.prompt_tokens, request.max_tokens, latency
        )

    # -- snapshot ---------------------------------------------------------------------------

    def geometry(self) -> dict[str, int]:
        """Schema v3's ``offload.geometry``: from the configuration."""
        return {
            "page_tokens": self.config.tokens_per_page,
            "row_checkpoint_interval_tokens": self.config.checkpoint_interval_tokens,
            "min_reusable_tokens": self.index.min_reusable_tokens,
        }

    def snapshot(self) -> dict[str, Any]:
        """docs/interface.md section 1: schema_version 1, or 3 (``snapshot_version``) with the
        fields of docs/snapshot.md's v3 section as well."""
        pool = self.pool
        version = self.config.snapshot_version
        counters = self.stats.as_dict(version)
        if version >= 3:
            counters["geometry"] = self.geometry()
        return {
            "schema_version": version,
            "generation": self.generation,
            "started_at": self.started_at,
            "identity": {
                "image_digest": self.image_digest,
                "container_id": self.container_id,
                "package": self.config.package,
                "checkpoint": self.config.checkpoint,
                # (v3, docs/snapshot.md) what answers: the lab labels its evidence SIMULATED
                "engine": ENGINE,
            },
            "admission": {"state": self.admission, "inflight_requests": self.inflight},
            "ranks": [dict(r) for r in self.ranks if r["rank"] not in self.lost_ranks],
            "offload": {
                "budget_bytes": pool.geometry.budget_bytes,
                "slabs": {"row": pool.row.snapshot(), "page": pool.page.snapshot()},
                "resident": {"records": self.index.resident_records, "bytes": pool.used_bytes},
                **counters,
            },
            # Beyond the schema (the sidecar ignores both): the engine's clocks, which
            # `observer-cost` compares at every phase edge, and what the simulator knows it is.
            "clock": self.clock_anchor(),
            "simulator": {"trace": {"enabled": self.trace_enabled,
                                    "cost": self.config.trace_cost}},
        }

    def clock_anchor(self) -> dict[str, float]:
        """The wall clock (Unix seconds, steppable) beside the process clock (never steps)."""
        now = self.clock()
        return {"unix_seconds": now + self.wall_offset, "monotonic_seconds": now - self._boot}
