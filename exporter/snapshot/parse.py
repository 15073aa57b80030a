"""Snapshots (schema 1 and 3) of the engine's host offload tier, from the body to the typed
`Snapshot`: decoded (limits.py), validated (validate.py), built here.

`parse_snapshot(body)` either returns an immutable `Snapshot` or raises `SnapshotError` whose
`path` names the offending field (`offload.slabs.row.free`). Unknown fields are ignored; a section
the engine leaves out is `None` here, so its metrics stay absent rather than reading 0.

Schema 3 is schema 1 with optional additions (V3_SECTIONS); both schemas, the sections and the
histograms' keys come from one source (exporter/snapshot/source.py). A v3 addition that breaks the
schema, or a histogram whose buckets could not be a Prometheus histogram, is left out of the
snapshot and named in `dropped_fields` (counted by the sidecar), rather than failing the whole
snapshot: a failed snapshot reads as an unreachable engine. A schema 1 snapshot's v3 fields are
unknown fields to it: ignored.

A body goes one way: decoded, then validated (validate.py, which hands schema 3's additions to
v3.py), then built into the reading model (model.py); no step calls back into one before it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from dataclasses import replace
from typing import Any

from exporter.labels import IDENTITY_FIELDS, SLAB_KINDS, ErrorReason
from exporter.snapshot import limits
from exporter.snapshot.model import (
    Admission,
    Identity,
    Lookups,
    Offload,
    Rank,
    Slab,
    Snapshot,
    SnapshotError,
)
from exporter.snapshot.validate import validated


def decode_json(body: bytes) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity, no numbers that overflow a float, nested at most
    exporter.snapshot.limits.MAX_DEPTH deep."""
    try:
        return limits.loads(body)
    except limits.JsonError as exc:
        raise SnapshotError(ErrorReason.DECODE, str(exc)) from None


def derive_generation(identity: Identity | None, started_at: float | None) -> str:
    """Generation for an engine that sends none: stable for one incarnation, new for the next."""
    material = json.dumps(
        [
            None if identity is None else [identity.image_digest, identity.container_id,
                                           identity.package, identity.checkpoint],
            None if started_at is None else round(started_at, 3),
        ]
    )
    return "d-" + hashlib.sha256(material.encode()).hexdigest()[:16]


def parse_snapshot(body: bytes) -> Snapshot:
    return snapshot_from_obj(decode_json(body))


def snapshot_from_obj(obj: Any) -> Snapshot:
    obj, version, dropped = validated(obj)
    snap = replace(_build(obj), schema_version=version)
    return replace(snap, dropped_fields=dropped) if dropped else snap


def _build(obj: dict[str, Any]) -> Snapshot:
    identity = None
    if (ident := obj.get("identity")) is not None:
        identity = Identity(*(ident.get(k) for k in IDENTITY_FIELDS))
    started_at = obj.get("started_at")
    if started_at is not None:
        started_at = float(started_at)
        if not math.isfinite(started_at):
            raise SnapshotError(ErrorReason.SCHEMA, "must be finite", "started_at")
    generation = obj.get("generation")
    admission = None
    if (adm := obj.get("admission")) is not None:
        inflight = adm.get("inflight_requests")
        admission = Admission(adm["state"], None if inflight is None else int(inflight))
    ranks = None
    if (raw_ranks := obj.get("ranks")) is not None:
        ranks = tuple(Rank(int(r["rank"]), r["gpu_uuid"]) for r in raw_ranks)
    offload = None if (off := obj.get("offload")) is None else _build_offload(off)
    return Snapshot(
        generation=(
            generation if generation is not None else derive_generation(identity, started_at)
        ),
        generation_derived=generation is None,
        started_at=started_at,
        identity=identity,
        admission=admission,
        ranks=ranks,
        offload=offload,
        engine=_engine(obj.get("identity")),
    )


def _engine(ident: Any) -> str | None:
    # validated: an engine that is not a label-shaped string is left out (dropped_fields)
    engine = ident.get("engine") if isinstance(ident, dict) else None
    return engine if isinstance(engine, str) else None


def _opt_int(section: dict[str, Any], key: str) -> int | None:
    value = section.get(key)
    return None if value is None else int(value)


def _build_offload(off: dict[str, Any]) -> Offload:
    slabs: dict[str, Slab] = {}
    for kind, raw in (off.get("slabs") or {}).items():
        if kind not in SLAB_KINDS:
            continue
        slab = Slab(int(raw["capacity"]), int(raw["free"]), int(raw["record_bytes"]))
        if slab.free > slab.capacity:
            raise SnapshotError(
                ErrorReason.SCHEMA,
                f"free ({slab.free}) exceeds capacity ({slab.capacity})",
                f"offload.slabs.{kind}.free",
            )
        slabs[kind] = slab
    resident = off.get("resident") or {}
    lookups = None
    if (raw_lookups := off.get("lookups")) is not None:
        misses = raw_lookups.get("misses")
        lookups = Lookups(
            total=int(raw_lookups["total"]),
            hits=_opt_int(raw_lookups, "hits"),
            misses=None if misses is None else {str(k): int(v) for k, v in misses.items()},
        )
    return Offload(
        budget_bytes=_opt_int(off, "budget_bytes"),
        slabs=slabs,
        resident_bytes=_opt_int(resident, "bytes"),
        lookups=lookups,
        fields=copy.deepcopy(off),  # the caller's object may change; this observation not
    )
