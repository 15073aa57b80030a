"""A phase edge's capture: what one fresh poll cycle saw of the engine, as /metrics exports it.

`capture_of(view)` reads the view that cycle published, so a phase's deltas use the same numbers
as the sidecar's own series: the offload counters of the snapshot (miss keys folded onto the
closed reason set), the derived row-pressure-with-page-headroom counter, and the engine's
pass-through request count, prompt and generated token totals and end-to-end latency histogram
(after the pass-through's merge of per-request series). Beside them, what an experiment must
hold fixed: the snapshot's identity, rank count and in-flight requests, every configured pin's
result, and the enforced power limit of each rank's GPU from the last NVML reading (NVML is not
polled at a phase edge). Pure: no I/O, no clock.

Captures are stored in the phases file and served by GET /experiment/phases, so they encode to
JSON and decode back (`to_json` / `from_json`, which rejects anything malformed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from exporter.checked import count, number, obj, opt_count, string
from exporter.cycle.derive import offload_counters
from exporter.cycle.pins import power_limits
from exporter.cycle.view import View
from exporter.labels import IDENTITY_FIELDS
from exporter.sources.engine_metrics import EXPORT_PREFIX, Family

LATENCY_FAMILY = EXPORT_PREFIX + "e2e_request_latency_seconds"
REQUESTS_FAMILY = EXPORT_PREFIX + "num_requests"
PROMPT_TOKENS_FAMILY = EXPORT_PREFIX + "prompt_tokens"
GENERATION_TOKENS_FAMILY = EXPORT_PREFIX + "generation_tokens"
# Raw engine miss keys kept per capture (evidence, never labels): `key_mismatch:ckpt=ab12` names
# the other key, which inspecting the key and checkpoint of a lookup needs. Bounded: a hostile
# engine may send thousands of keys.
MAX_RAW_MISS_KEYS = 32
MAX_RAW_MISS_KEY_CHARS = 64


class CaptureError(Exception):
    """The fresh poll did not produce a usable capture (the engine did not answer both)."""


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class Histogram:
    count: float
    sum: float
    buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), +Inf last


@dataclass(frozen=True, slots=True)
class Capture:
    at: float  # wall time the poll started
    generation: str
    identity: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    budget_bytes: int | None = None
    slabs: Mapping[str, Mapping[str, int]] = field(default_factory=lambda: _frozen({}))
    counters: Mapping[str, int] = field(default_factory=lambda: _frozen({}))  # offload_counters
    misses_raw: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    headroom_total: int | None = None  # helios_offload_row_pressure_with_page_headroom_total
    requests: float | None = None
    latency: Histogram | None = None
    # (v3) /metrics token totals, the snapshot's ranks and in-flight requests, the pins' results
    # (pin -> ok, None: unknown) and each rank GPU's enforced power limit (None: no NVML reading).
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    ranks: int | None = None
    inflight: int | None = None
    pins: Mapping[str, bool | None] = field(default_factory=lambda: _frozen({}))
    power_limits: Mapping[str, float | None] | None = None

    def free_ratio(self, kind: str) -> float | None:
        slab = self.slabs.get(kind)
        if slab is None or not slab.get("capacity"):
            return None
        return slab["free"] / slab["capacity"]


def capture_of(view: View) -> Capture:
    """The capture of a view published by a fresh cycle, at the time that cycle began polling;
    CaptureError when that cycle's snapshot or /metrics poll failed."""
    at = view.polled_at
    if at is None:
        raise CaptureError("no poll cycle has run")
    eng = view.engine
    snap = eng.snapshot
    if snap is None or not eng.snapshot_current:
        raise CaptureError("engine snapshot: " + _why(view, "engine_snapshot"))
    if eng.passthrough is None:
        raise CaptureError("engine /metrics: " + _why(view, "engine_metrics"))
    identity = {}
    if snap.identity is not None:
        identity = {k: v for k in IDENTITY_FIELDS if (v := getattr(snap.identity, k)) is not None}
    if snap.engine is not None:  # (v3) the simulator says so: its evidence is SIMULATED
        identity["engine"] = snap.engine
    offload = snap.offload
    slabs: dict[str, Mapping[str, int]] = {}
    misses_raw: dict[str, int] = {}
    if offload is not None:
        slabs = {kind: _frozen({"capacity": s.capacity, "free": s.free,
                                "record_bytes": s.record_bytes})
                 for kind, s in offload.slabs.items()}
        if offload.lookups is not None and offload.lookups.misses is not None:
            for key in sorted(offload.lookups.misses)[:MAX_RAW_MISS_KEYS]:
                misses_raw[key[:MAX_RAW_MISS_KEY_CHARS]] = offload.lookups.misses[key]
    headroom = eng.headroom
    # What /metrics exports (collectors/passthrough.py): counters and histograms are the totals
    # folded across cycles (a per-request series that vanished keeps what it counted).
    exported = list(eng.passthrough.families)
    if eng.native is not None and eng.native.generation == eng.passthrough_generation:
        exported += eng.native.families
    families = {f.name: f for f in exported}
    latency = _histogram(families.get(LATENCY_FAMILY))
    requests = _total(families.get(REQUESTS_FAMILY))
    if latency is not None:
        # The histogram's count is every finished request (SGLang has no num_requests_total).
        requests = latency.count
    nvml = view.latest.get("nvml")
    limits = power_limits(nvml.value if nvml is not None else None)
    rank_limits = None
    if limits is not None and snap.ranks:
        rank_limits = {r.gpu_uuid: limits.get(r.gpu_uuid) for r in snap.ranks}
    return Capture(
        at=at,
        generation=snap.generation,
        identity=_frozen(identity),
        budget_bytes=offload.budget_bytes if offload is not None else None,
        slabs=_frozen(slabs),
        counters=_frozen(offload_counters(offload)),
        misses_raw=_frozen(misses_raw),
        headroom_total=(headroom.total if headroom is not None
                        and headroom.generation == snap.generation else None),
        requests=requests,
        latency=latency,
        prompt_tokens=_total(families.get(PROMPT_TOKENS_FAMILY)),
        generation_tokens=_total(families.get(GENERATION_TOKENS_FAMILY)),
        ranks=None if snap.ranks is None else len(snap.ranks),
        inflight=None if snap.admission is None else snap.admission.inflight_requests,
        pins=_frozen({p.pin: p.ok for p in view.pins}),
        power_limits=None if rank_limits is None else _frozen(rank_limits),
    )


def _why(view: View, source: str) -> str:
    health = view.sources.get(source)
    if health is None or not health.last_error:
        return "no usable answer"
    return f"{health.last_reason}: {health.last_error}"


def _histogram(family: Family | None) -> Histogram | None:
    if family is None or family.type != "histogram":
        return None
    count = total = None
    buckets = []
    for name, labels, value in family.samples:
        if name.endswith("_bucket"):
            buckets.append((float(dict(labels)["le"]), value))
        elif name.endswith("_count") and not labels:
            count = value
        elif name.endswith("_sum") and not labels:
            total = value
    if count is None or total is None or not buckets:
        return None
    return Histogram(count, total, tuple(sorted(buckets)))


def _total(family: Family | None) -> float | None:
    if family is None:
        return None
    values = [v for name, labels, v in family.samples if name.endswith("_total") and not labels]
    return values[0] if len(values) == 1 else None


# -- JSON ---------------------------------------------------------------------------------------
def le_text(bound: float) -> str:
    """A bucket bound as JSON can hold it (no Infinity in JSON)."""
    return "+Inf" if bound == math.inf else repr(bound)


def to_json(c: Capture) -> dict[str, Any]:
    return {
        "at": c.at,
        "generation": c.generation,
        "identity": dict(c.identity),
        "budget_bytes": c.budget_bytes,
        "slabs": {k: dict(v) for k, v in c.slabs.items()},
        "counters": dict(c.counters),
        "misses_raw": dict(c.misses_raw),
        "row_pressure_with_page_headroom_total": c.headroom_total,
        "requests": c.requests,
        "e2e_latency_seconds": None if c.latency is None else {
            "count": c.latency.count, "sum": c.latency.sum,
            "buckets": [[le_text(le), n] for le, n in c.latency.buckets]},
        "prompt_tokens": c.prompt_tokens,
        "generation_tokens": c.generation_tokens,
        "ranks": c.ranks,
        "inflight": c.inflight,
        "pins": dict(c.pins),
        "power_limits_watts": None if c.power_limits is None else dict(c.power_limits),
    }


def from_json(raw: Any, what: str = "capture") -> Capture:
    """The capture `to_json` wrote; ValueError naming the field on anything else."""
    d = obj(raw, what)
    latency = None
    if (h := d.get("e2e_latency_seconds")) is not None:
        h = obj(h, f"{what}.e2e_latency_seconds")
        pairs = h.get("buckets")
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise ValueError(f"{what}.e2e_latency_seconds.buckets: expected [le, count] pairs")
        latency = Histogram(number(h.get("count"), f"{what}.count"),
                            number(h.get("sum"), f"{what}.sum"),
                            tuple((float(string(le, f"{what}.le")), number(n, f"{what}.bucket"))
                                  for le, n in pairs))
    slabs = {k: _frozen({f: count(v, f"{what}.slabs.{k}.{f}")
                         for f, v in obj(s, f"{what}.slabs.{k}").items()})
             for k, s in obj(d.get("slabs", {}), f"{what}.slabs").items()}
    return Capture(
        at=number(d.get("at"), f"{what}.at"),
        generation=string(d.get("generation"), f"{what}.generation"),
        identity=_frozen({k: string(v, f"{what}.identity.{k}")
                          for k, v in obj(d.get("identity", {}), f"{what}.identity").items()}),
        budget_bytes=opt_count(d.get("budget_bytes"), f"{what}.budget_bytes"),
        slabs=_frozen(slabs),
        counters=_frozen({k: count(v, f"{what}.counters.{k}")
                          for k, v in obj(d.get("counters", {}), f"{what}.counters").items()}),
        misses_raw=_frozen({k: count(v, f"{what}.misses_raw")
                            for k, v in obj(d.get("misses_raw", {}), f"{what}.misses_raw").items()}),
        headroom_total=opt_count(d.get("row_pressure_with_page_headroom_total"),
                                 f"{what}.row_pressure_with_page_headroom_total"),
        requests=None if d.get("requests") is None else number(d["requests"], f"{what}.requests"),
        latency=latency,
        # Captures stored before v3 have none of these: unknown.
        prompt_tokens=_opt_number(d.get("prompt_tokens"), f"{what}.prompt_tokens"),
        generation_tokens=_opt_number(d.get("generation_tokens"), f"{what}.generation_tokens"),
        ranks=opt_count(d.get("ranks"), f"{what}.ranks"),
        inflight=opt_count(d.get("inflight"), f"{what}.inflight"),
        pins=_frozen({k: _opt_bool(v, f"{what}.pins.{k}")
                      for k, v in obj(d.get("pins") or {}, f"{what}.pins").items()}),
        power_limits=None if d.get("power_limits_watts") is None else _frozen(
            {k: _opt_number(v, f"{what}.power_limits_watts.{k}")
             for k, v in obj(d["power_limits_watts"], f"{what}.power_limits_watts").items()}),
    )


def _opt_number(raw: Any, what: str) -> float | None:
    return None if raw is None else number(raw, what)


def _opt_bool(raw: Any, what: str) -> bool | None:
    if raw is not None and not isinstance(raw, bool):
        raise ValueError(f"{what}: expected true, false or null")
    return raw
