"""The engine's two polled endpoints: the offload snapshot and its own /metrics."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from exporter.labels import ErrorReason
from exporter.snapshot.model import Snapshot, SnapshotError
from exporter.snapshot.parse import parse_snapshot
from exporter.sources import engine_metrics as passthrough
from exporter.sources.base import Result
from exporter.sources.http import Bounds, FetchError, bounded_get, off_loop_if_large

SNAPSHOT_PATH = "/debug/offload/snapshot"
METRICS_PATH = "/metrics"


@dataclass(slots=True)
class EngineTraffic:
    """What the sidecar costs the engine: requests by path and outcome, body bytes by path."""

    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    response_bytes: Counter[str] = field(default_factory=Counter)

    def count(self, path: str, outcome: str, size: int) -> None:
        self.requests[(path, outcome)] += 1
        self.response_bytes[path] += size


class EngineSource:
    """Fetches one engine path and parses it; never raises."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        max_bytes: int,
        traffic: EngineTraffic,
        clock: Callable[[], float] = time.time,
        timeout: float | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.max_bytes = max_bytes
        self.traffic = traffic
        self.clock = clock
        self.timer = timer  # durations
        self.timeout = timeout  # whole request; None: the client's read timeout
        self.series_cache = passthrough.SeriesCache()

    def _bounds(self) -> Bounds:
        deadline = self.timeout if self.timeout is not None else self.client.timeout.read
        return Bounds(deadline if deadline is not None else 30.0, self.max_bytes)

    async def _get(self, path: str, label: str) -> tuple[bytes | None, ErrorReason | None, str]:
        try:
            resp = await bounded_get(self.client, self.base_url + path, self._bounds())
        except FetchError as exc:
            self.traffic.count(label, exc.reason.value, 0)
            return None, exc.reason, str(exc)
        self.traffic.count(label, "ok", len(resp.body))
        return resp.body, None, ""

    async def snapshot(self) -> Result[Snapshot]:
        started, t0 = self.clock(), self.timer()
        body, reason, message = await self._get(SNAPSHOT_PATH, "snapshot")
        if body is not None:
            try:
                snap = await off_loop_if_large(len(body), parse_snapshot, body)
            except SnapshotError as exc:
                reason, message = exc.reason, f"snapshot {exc}"
            else:
                return Result(snap, started, self.timer() - t0)
        assert reason is not None
        return Result(None, started, self.timer() - t0, reason, message)

    async def _metrics_body(self) -> tuple[bytes | None, ErrorReason | None, str]:
        """The /metrics body of this cycle (exporter/engines/source.py shares one request)."""
        return await self._get(METRICS_PATH, "metrics")

    async def metrics(self, max_series_per_family: int) -> Result[passthrough.Parsed]:
        started, t0 = self.clock(), self.timer()
        body, reason, message = await self._metrics_body()
        if body is not None:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                reason, message = ErrorReason.DECODE, "engine /metrics is not UTF-8"
            else:
                parsed = await off_loop_if_large(
                    len(body), passthrough.parse, text, None, max_series_per_family,
                    self.series_cache,
                )
                if parsed.samples_seen and parsed.malformed_lines >= parsed.samples_seen:
                    reason = ErrorReason.DECODE
                    message = f"engine /metrics: {parsed.malformed_lines} malformed lines"
                else:
                    return Result(parsed, started, self.timer() - t0)
        assert reason is not None
        return Result(None, started, self.timer() - t0, reason, message)
