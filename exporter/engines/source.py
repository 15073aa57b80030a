"""An engine of another kind as the sidecar's engine source: its `/metrics` (one request a
cycle, read by the mapping and by the pass-through alike) and its health path for liveness;
there is no snapshot, and nothing asks for one.

`snapshot()` returns the snapshot the engine's mapping can honestly fill (exporter/engines/
translate.py), so the restore keeper, the collectors and the alerts read it as they read
Helios's: the engine unreachable on either path opens the window as a Helios engine's
disappearance does. `auto` decides the kind from the first exposition's families (Helios when
it holds none and the snapshot answers), logs what it decided, and keeps it. A configured kind
whose families the exposition does not hold is a clear error (logged when it begins and ends,
`helios_engine_kind_mismatch`, a failed poll that opens no window), never silently empty
families.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping as MappingType
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import structlog

from exporter.engines import MAPPINGS, identity, kinds
from exporter.engines.exposition import Exposition, parse
from exporter.engines.identity import Identity
from exporter.engines.model import Mapping
from exporter.engines.signals import SIGNALS
from exporter.engines.state import KindState
from exporter.engines.translate import Translated, translate
from exporter.labels import HEALTH_PATH, ErrorReason
from exporter.snapshot import Lookups, Offload, Snapshot
from exporter.sources.base import Result
from exporter.sources.engine import METRICS_PATH, EngineSource
from exporter.sources.http import off_loop_if_large

log = structlog.get_logger("helios_exporter.engines")
Fetched = tuple[bytes | None, ErrorReason | None, str]
_ALL_WANTED = frozenset().union(*(m.wanted() for m in MAPPINGS.values()))


class KindSource(EngineSource):
    """The engine source of `--engine-kind` (helios: the snapshot source itself)."""

    def __init__(self, *args: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = KindState(kind, None if kind == "auto" else kind,
                               MAPPINGS[kind].name if kind in MAPPINGS else None)
        self._identity: Identity | None = None
        self._shared: asyncio.Future[Fetched] | None = None
        self._last_dropped: frozenset[str] = frozenset()  # logged once per change

    # -- the one /metrics request of a cycle -----------------------------------------------------
    async def _metrics_body(self) -> Fetched:
        shared, self._shared = self._shared, None
        return await shared if shared is not None else await super()._metrics_body()

    async def snapshot(self) -> Result[Snapshot]:
        if self.state.kind == "helios":
            return await super().snapshot()
        started, t0 = self.clock(), self.timer()
        shared = self._shared = asyncio.ensure_future(self._get(METRICS_PATH, "metrics"))
        mapping = MAPPINGS.get(self.state.kind or "")
        health: Fetched = (b"", None, "")
        if mapping is not None:
            (body, reason, message), health = await asyncio.gather(
                asyncio.shield(shared), self._get(mapping.health_path, HEALTH_PATH))
        else:
            body, reason, message = await asyncio.shield(shared)
        if health[1] is not None:
            return Result(None, started, self.timer() - t0, health[1],
                          f"engine {mapping.health_path if mapping else ''}: {health[2]}")
        if body is None:
            assert reason is not None
            return Result(None, started, self.timer() - t0, reason, message)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return Result(None, started, self.timer() - t0, ErrorReason.DECODE,
                          "engine /metrics is not UTF-8")
        exp = await off_loop_if_large(len(body), parse, text,
                                      mapping.wanted() if mapping is not None else _ALL_WANTED)
        found = kinds.found(exp)
        if mapping is None:  # auto, not decided yet
            if found == "unknown":
                res = await super().snapshot()
                if res.ok:
                    self._decide("helios", "no engine family in /metrics; the snapshot answers")
                return res
            self._decide(found, f"/metrics holds {found} families")
            if found == "helios":
                return await super().snapshot()
            mapping = MAPPINGS[found]
        elif found != mapping.kind:
            return self._mismatched(started, t0, mapping, found)
        self._matched()
        snap = self._translated(mapping, exp, started)
        return Result(snap, started, self.timer() - t0)

    # -- kind ----------------------------------------------------------------------------------
    def _decide(self, kind: str, why: str) -> None:
        mapping = MAPPINGS.get(kind)
        self.state = replace(self.state, kind=kind, mapping=mapping.name if mapping else None)
        log.info("engine_kind_decided", kind=kind, mapping=self.state.mapping, reason=why)

    def _mismatched(self, started: float, t0: float, mapping: Mapping, found: str) -> Result[Snapshot]:
        what = (f"{found} families" if found != "unknown"
                else f"no family of any engine (is it started with {mapping.flags[0]}?)"
                if mapping.flags else "no family of any engine")
        message = (f"--engine-kind {mapping.kind}: the engine's /metrics holds {what}, not "
                   f"{mapping.kind} ones" + (f" (--engine-kind {found} or auto reads it)"
                                             if found != "unknown" else ""))
        if self.state.mismatch != found:
            log.error("engine_kind_mismatch", kind=mapping.kind, found=found, error=message)
        self.state = replace(self.state, mismatch=found, message=message)
        return Result(None, started, self.timer() - t0, ErrorReason.SCHEMA, message)

    def _matched(self) -> None:
        if self.state.mismatch is not None:
            log.info("engine_kind_matched", kind=self.state.kind)
            self.state = replace(self.state, mismatch=None, message="")

    # -- translation ---------------------------------------------------------------------------
    def _translated(self, mapping: Mapping, exp: Exposition, now: float) -> Snapshot:
        tr = translate(mapping, exp)
        self._identity = identity.advance(self._identity, mapping.kind, exp, _counters(tr), now)
        _log_coverage(mapping, self.state.coverage, tr.coverage)
        if tr.dropped and frozenset(tr.dropped) != self._last_dropped:
            log.warning("engine_values_dropped", kind=mapping.kind, fields=tr.dropped)
        self._last_dropped = frozenset(tr.dropped)
        self.state = replace(self.state, coverage=MappingProxyType(dict(tr.coverage)),
                             evidence=self._identity.evidence)
        fields = tr.fields
        lookups = fields.get("lookups", {})
        budget = fields.get("budget_bytes")
        # The typed slabs stay empty: the geometry rules need record sizes no engine states.
        offload = None if not fields else Offload(
            budget_bytes=None if budget is None else int(budget), slabs={}, resident_bytes=None,
            evictions={},
            lookups=Lookups(int(lookups["total"]), None, None) if "total" in lookups else None,
            fields=fields)
        return Snapshot(generation=self._identity.generation, generation_derived=True,
                        started_at=self._identity.started_at, identity=None, admission=None,
                        ranks=None, offload=offload, dropped_fields=tuple(tr.dropped),
                        schema_version=3, engine=mapping.kind)


def _counters(tr: Translated) -> dict[str, float]:
    """The mapped counters' values (watched for a reset)."""
    out: dict[str, float] = {}
    for signal in SIGNALS:
        if signal.kind != "counter" or signal.path is None or "<" in signal.path:
            continue
        node: Any = tr.fields
        for part in signal.path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, int | float):
            out[signal.name] = float(node)
    return out


def _log_coverage(mapping: Mapping, before: MappingType[str, str],
                  after: MappingType[str, str]) -> None:
    """The coverage once at the first answer, and once at each change (an upgraded engine
    whose families moved)."""
    if dict(before) == dict(after):
        return
    if not before:
        log.info("engine_coverage", kind=mapping.kind, mapping=mapping.name,
                 native=sum(v == "native" for v in after.values()),
                 derived=sum(v == "derived" for v in after.values()),
                 absent=[s for s, v in after.items() if v == "absent"])
        return
    gone = [s for s, v in after.items() if v == "absent" and before.get(s) != v]
    came = [s for s, v in after.items() if v != "absent" and before.get(s) == "absent"]
    # A family that comes is an engine creating a series at its first event (or an upgrade
    # adding one); one that goes is a family moved or renamed: what a panel loses.
    (log.warning if gone else log.info)("engine_coverage_changed", kind=mapping.kind,
                                        mapping=mapping.name, now_absent=gone, now_present=came)
