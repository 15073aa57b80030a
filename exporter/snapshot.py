"""Snapshots (schema 1 and 3) of the engine's host offload tier: JSON Schema validation and
typed parsing.

`parse_snapshot(body)` either returns an immutable `Snapshot` or raises `SnapshotError` whose
`path` names the offending field (`offload.slabs.row.free`). Unknown fields are ignored; a section
the engine leaves out is `None` here, so its metrics stay absent rather than reading 0.

Schema 3 is schema 1 with optional additions (V3_SECTIONS); both schemas, the sections and the
histograms' keys come from one source (exporter/schema_source.py). A v3 addition that breaks the
schema, or a histogram whose buckets could not be a Prometheus histogram, is left out of the
snapshot and named in `dropped_fields` (counted by the sidecar), rather than failing the whole
snapshot: a failed snapshot reads as an unreachable engine. A schema 1 snapshot's v3 fields are
unknown fields to it: ignored.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal

import jsonschema

from exporter import snapshot_schema
from exporter.labels import IDENTITY_FIELDS, ErrorReason
from exporter.snapshot_schema import HISTOGRAM_KEYS, SCHEMA_VERSIONS, V3_SECTIONS
from exporter.sources import json_limits

AdmissionState = Literal["open", "draining", "closed"]


class SnapshotError(ValueError):
    """A snapshot that cannot be used; `reason` is a closed-set value, `path` a field path."""

    def __init__(self, reason: ErrorReason, message: str, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.reason = reason
        self.path = path


@dataclass(frozen=True, slots=True)
class Identity:
    image_digest: str | None = None
    container_id: str | None = None
    package: str | None = None
    checkpoint: str | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    state: AdmissionState
    inflight_requests: int | None


@dataclass(frozen=True, slots=True)
class Rank:
    rank: int
    gpu_uuid: str


@dataclass(frozen=True, slots=True)
class Slab:
    capacity: int
    free: int
    record_bytes: int


@dataclass(frozen=True, slots=True)
class Evictions:
    attempts: int
    outcomes: dict[str, int]  # only the outcomes the engine reported


@dataclass(frozen=True, slots=True)
class Lookups:
    total: int
    hits: int | None
    misses: dict[str, int] | None  # raw engine keys; mapped onto the closed set in derive


@dataclass(frozen=True, slots=True)
class Offload:
    """The offload section. `fields` is the section as the schema validated it: the metric
    catalogue reads every field by its path there (exporter/catalogue/model.py), so a new field
    needs no attribute here. The typed attributes are only those the sidecar's own checks read
    (geometry, derive, the phase captures); each is read somewhere."""

    budget_bytes: int | None
    slabs: dict[str, Slab]
    resident_bytes: int | None
    evictions: dict[str, Evictions]
    lookups: Lookups | None
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Snapshot:
    generation: str
    generation_derived: bool  # True when the engine sent none and we derived it
    started_at: float | None
    identity: Identity | None
    admission: Admission | None
    ranks: tuple[Rank, ...] | None
    offload: Offload | None
    # Identity fields whose value cannot be a label value (pattern in the schema): left out,
    # so the checks that need them are unknown, rather than the whole snapshot being rejected;
    # and v3 sections that broke the schema or a histogram rule, left out likewise.
    dropped_fields: tuple[str, ...] = ()
    schema_version: int = 1
    # (v3) identity.engine: what software answers, e.g. "helios-simulator" (docs/snapshot.md);
    # never a label; the lab's evidence is labelled SIMULATED from it. None when absent or not a
    # label-shaped string.
    engine: str | None = None



@cache
def schema(version: int = 1) -> dict[str, Any]:
    """The JSON Schema of snapshot `version` (1 or 3): the package's exporter/schema/ files hold
    the same, written from the same source."""
    return snapshot_schema.schema(version)


@cache
def validator(version: int = 1) -> jsonschema.Draft202012Validator:
    # The shipped schema keeps its `$defs` for readers; the validator gets them inlined, since
    # resolving a `$ref` costs more than checking what it points to (half of a poll's CPU).
    shipped = schema(version)
    return jsonschema.Draft202012Validator(_inline_refs(shipped, shipped.get("$defs", {})))


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def _path(parts: Any) -> str:
    return ".".join(str(p) for p in parts)


def decode_json(body: bytes) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity, no numbers that overflow a float, nested at most
    exporter.sources.json_limits.MAX_DEPTH deep."""
    try:
        return json_limits.loads(body)
    except json_limits.JsonError as exc:
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
    version = 1
    if isinstance(obj, dict) and "schema_version" in obj:
        raw = obj["schema_version"]
        # true equals 1 in Python, not in JSON: the schema refuses it (a `schema` error).
        if not isinstance(raw, bool) and raw not in SCHEMA_VERSIONS:
            shown = raw if isinstance(raw, int) and not isinstance(raw, bool) else "?"
            raise SnapshotError(
                ErrorReason.UNSUPPORTED_VERSION,
                f"schema_version {shown} is not supported (this sidecar reads 1 and 3)",
                "schema_version",
            )
        version = 3 if raw == 3 else 1  # true (== 1) is read as 1 and refused
    obj, dropped = _drop_unusable_identity(obj)
    valid = False
    if version == 3:
        obj, broken, valid = _drop_broken_additions(obj)
        dropped += broken
    else:
        obj = _without(obj, _V3_PATHS)  # unknown fields to schema 1
    error = None if valid else jsonschema.exceptions.best_match(
        validator(version).iter_errors(_check_misses(obj)))
    if error is not None:
        # The message can echo input; keep it short, it goes to logs and /status only.
        raise SnapshotError(ErrorReason.SCHEMA, error.message[:200], _path(error.absolute_path))
    _check_anchored(obj)
    snap = replace(_build(obj), schema_version=version)
    return replace(snap, dropped_fields=dropped) if dropped else snap


# -- schema 3's additions -----------------------------------------------------------------------
_V3_PATHS: tuple[tuple[str, ...], ...] = tuple(tuple(s.split(".")) for s in V3_SECTIONS)
# Histogram additions: their count, sum and buckets keys (docs/snapshot.md, "Schema v3").
_HISTOGRAM_KEYS: dict[tuple[str, ...], tuple[str, str, str]] = {
    tuple(path.split(".")): keys for path, keys in HISTOGRAM_KEYS.items()}


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _without(obj: Any, paths: tuple[tuple[str, ...], ...]) -> Any:
    """`obj` without the fields at `paths`, copying only the objects on the way to them."""
    for path in paths:
        obj = _remove(obj, path)
    return obj


def _remove(node: Any, path: tuple[str, ...]) -> Any:
    """`node` without the field at `path`; `node` itself (no copy) when it has no such field."""
    if not isinstance(node, dict) or path[0] not in node:
        return node
    if len(path) == 1:
        return {k: v for k, v in node.items() if k != path[0]}
    child = _remove(node[path[0]], path[1:])
    return node if child is node[path[0]] else {**node, path[0]: child}


def _addition(path: tuple[Any, ...]) -> tuple[str, ...] | None:
    """The v3 addition a schema error's path lies in; None when it lies outside every one."""
    return next((p for p in _V3_PATHS if tuple(path[:len(p)]) == p), None)


def _drop_broken_additions(obj: Any) -> tuple[Any, tuple[str, ...], bool]:
    """`obj` without the v3 additions that break the schema or a histogram rule, their names, and
    whether the schema held as it was (then it need not be checked again).

    An error outside every addition is left for the caller's validation to report."""
    if not isinstance(obj, dict):
        return obj, (), False
    broken: set[tuple[str, ...]] = set()
    outside = False  # the snapshot itself is broken
    for error in validator(3).iter_errors(_check_misses(obj)):
        where = _addition(tuple(error.absolute_path))
        if where is None:
            outside = True
        else:
            broken.add(where)
    if outside:
        return _without(obj, tuple(broken)), (), False
    valid = not broken
    for path, keys in _HISTOGRAM_KEYS.items():
        if path not in broken and (node := _get(obj, path)) is not None \
                and histogram_problem(node, *keys):
            broken.add(path)
    ordered = tuple(p for p in _V3_PATHS if p in broken)
    return _without(obj, ordered), tuple(".".join(p) for p in ordered), valid


def histogram_problem(node: Mapping[str, Any], count_key: str, sum_key: str,
                      buckets_key: str) -> str | None:
    """Why a schema-valid histogram cannot be a Prometheus one; None when it can: bucket counts
    that fall as the bound grows, `+Inf` other than the count, a sum without observations."""
    buckets = sorted((float(le), n) for le, n in node[buckets_key].items())
    counts = [n for _, n in buckets]
    if any(b < a for a, b in itertools.pairwise(counts)):
        return "bucket counts fall as the bound grows"
    if node[buckets_key]["+Inf"] != node[count_key]:
        return "+Inf is not the count"
    if node[count_key] == 0 and node[sum_key] != 0:
        return "a sum without observations"
    return None


@cache
def _label_re() -> re.Pattern[str]:
    """The schema's label-value pattern, for a full (anchored) match."""
    pattern: str = schema()["$defs"]["label"]["pattern"]
    return re.compile(pattern.removeprefix("^").removesuffix("$"))


def label_value_ok(text: str) -> bool:
    """Whether `text` is what the schema accepts for an identity field (a usable label value)."""
    return _label_re().fullmatch(text) is not None


def max_ranks() -> int:
    """The most entries a snapshot's `ranks` may list (the schema's maxItems)."""
    limit: int = schema()["properties"]["ranks"]["maxItems"]
    return limit


def _drop_unusable_identity(obj: Any) -> tuple[Any, tuple[str, ...]]:
    """Identity strings are descriptive: one that cannot be a label value (a space, a quote, an
    empty or overlong string) is left out and reported, instead of failing the snapshot; a
    failed snapshot would read as an unreachable engine and open a restore window."""
    if not isinstance(obj, dict) or not isinstance(ident := obj.get("identity"), dict):
        return obj, ()
    # (v3) identity.engine is descriptive too: dropped and counted (exported once it was, like
    # a v3 section), never a reason to refuse the snapshot.
    dropped = tuple(
        f"identity.{k}" for k in (*IDENTITY_FIELDS, "engine")
        if k in ident and not (isinstance(ident[k], str) and _label_re().fullmatch(ident[k]))
    )
    if not dropped:
        return obj, ()
    keep = {k: v for k, v in ident.items() if f"identity.{k}" not in dropped}
    return {**obj, "identity": keep}, dropped


MAX_COUNT = 2**53 - 1


def _is_count(value: Any) -> bool:
    # What the schema's `count` accepts: an integer (2.0 included, as in JSON Schema), in range.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not value.is_integer():
        return False
    return 0 <= value <= MAX_COUNT


def _check_misses(obj: Any) -> Any:
    """Validate `offload.lookups.misses` by hand; return `obj` with it emptied for jsonschema.

    The engine chooses how many keys it sends, and jsonschema spends ~50 µs per key on the
    `$ref` of every value: 10000 keys cost half a second and a 5 MB body a dozen seconds per
    poll. The same rules (at most `maxProperties` keys, every value a count), checked here with
    the key count first, cost a few milliseconds.
    """
    try:
        misses = obj["offload"]["lookups"]["misses"]
    except (KeyError, TypeError, IndexError):
        return obj
    if not isinstance(misses, dict):
        return obj  # a wrong type: jsonschema reports it
    path = "offload.lookups.misses"
    limit = schema()["properties"]["offload"]["properties"]["lookups"]["properties"]["misses"][
        "maxProperties"
    ]
    if len(misses) > limit:
        raise SnapshotError(ErrorReason.SCHEMA, f"{len(misses)} keys, more than {limit}", path)
    for key, value in misses.items():
        if not _is_count(value):
            raise SnapshotError(ErrorReason.SCHEMA, f"{str(value)[:40]!r} is not a count",
                                f"{path}.{key[:64]}")
    lookups = {**obj["offload"]["lookups"], "misses": {}}
    return {**obj, "offload": {**obj["offload"], "lookups": lookups}}


def _check_anchored(obj: dict[str, Any]) -> None:
    """Re-check the patterns of the strings that become label values, anchored at both ends.

    jsonschema matches `pattern` with `re.search`, whose `$` also matches before a final
    newline: `"g-1\\n"` passes `^[A-Za-z0-9._:-]{1,64}$`. A label value must not end in one.
    """
    fields: list[tuple[str, Any]] = [("generation", obj.get("generation"))]
    ranks = obj.get("ranks") or []
    fields += [(f"ranks.{i}.gpu_uuid", r.get("gpu_uuid")) for i, r in enumerate(ranks)]
    for path, value in fields:
        if isinstance(value, str) and value.endswith("\n"):
            raise SnapshotError(ErrorReason.SCHEMA, "must not end in a newline", path)



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
    engine = ident.get("engine") if isinstance(ident, dict) else None
    return engine if isinstance(engine, str) and label_value_ok(engine) else None


def _opt_int(section: dict[str, Any], key: str) -> int | None:
    value = section.get(key)
    return None if value is None else int(value)


def _build_offload(off: dict[str, Any]) -> Offload:
    slabs: dict[str, Slab] = {}
    for kind, raw in (off.get("slabs") or {}).items():
        if kind not in ("row", "page"):
            continue
        slab = Slab(int(raw["capacity"]), int(raw["free"]), int(raw["record_bytes"]))
        if slab.free > slab.capacity:
            raise SnapshotError(
                ErrorReason.SCHEMA,
                f"free ({slab.free}) exceeds capacity ({slab.capacity})",
                f"offload.slabs.{kind}.free",
            )
        slabs[kind] = slab
    evictions: dict[str, Evictions] = {}
    for pressure, raw in (off.get("evictions") or {}).items():
        if pressure not in ("row", "page"):
            continue
        outcomes = {
            k: int(raw[k]) for k in ("evicted", "pinned", "non_durable", "no_eligible") if k in raw
        }
        evictions[pressure] = Evictions(int(raw["attempts"]), outcomes)
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
        evictions=evictions,
        lookups=lookups,
        fields=copy.deepcopy(off),  # the caller's object may change; this observation not
    )
