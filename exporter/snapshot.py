"""Snapshot v1 of the engine's host offload tier: JSON Schema validation and typed parsing.

`parse_snapshot(body)` either returns an immutable `Snapshot` or raises `SnapshotError` whose
`path` names the offending field (`offload.slabs.row.free`). Unknown fields are ignored; a section
the engine leaves out is `None` here, so its metrics stay absent rather than reading 0.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any, Literal

import jsonschema

from exporter.labels import IDENTITY_FIELDS, ErrorReason

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
class HostTier:
    stores: int | None
    tokens_restored: int | None
    prompt_tokens_reused: int | None


@dataclass(frozen=True, slots=True)
class Offload:
    budget_bytes: int | None
    slabs: dict[str, Slab]
    resident_records: int | None
    resident_bytes: int | None
    evictions: dict[str, Evictions]
    retired_leaves: dict[str, int]
    ancestor_row_compactions: int | None
    lookups: Lookups | None
    host: HostTier | None
    # The section as the schema validated it: the metric catalogue reads a field by its path
    # (exporter/catalogue/model.py), so a new field needs no attribute here.
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
    # so the checks that need them are unknown, rather than the whole snapshot being rejected.
    dropped_fields: tuple[str, ...] = ()


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of snapshot v1 shipped in the package."""
    text = resources.files("exporter.schema").joinpath("snapshot-v1.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def validator() -> jsonschema.Draft202012Validator:
    # The shipped schema keeps its `$defs` for readers; the validator gets them inlined, since
    # resolving a `$ref` costs more than checking what it points to (half of a poll's CPU).
    return jsonschema.Draft202012Validator(_inline_refs(schema(), schema().get("$defs", {})))


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name} is not valid JSON")


def _path(parts: Any) -> str:
    return ".".join(str(p) for p in parts)


def decode_json(body: bytes) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity, no numbers that overflow a float."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(ErrorReason.DECODE, f"body is not UTF-8 ({exc.reason})") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise SnapshotError(ErrorReason.DECODE, "JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, int-digit limit, NaN/Infinity
        raise SnapshotError(ErrorReason.DECODE, f"body is not valid JSON: {exc}") from None


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
    if isinstance(obj, dict) and "schema_version" in obj and obj["schema_version"] != 1:
        version = obj["schema_version"]
        shown = version if isinstance(version, int) and not isinstance(version, bool) else "?"
        raise SnapshotError(
            ErrorReason.UNSUPPORTED_VERSION,
            f"schema_version {shown} is not supported (this sidecar reads 1)",
            "schema_version",
        )
    obj, dropped = _drop_unusable_identity(obj)
    error = jsonschema.exceptions.best_match(validator().iter_errors(_check_misses(obj)))
    if error is not None:
        # The message can echo input; keep it short, it goes to logs and /status only.
        raise SnapshotError(ErrorReason.SCHEMA, error.message[:200], _path(error.absolute_path))
    _check_anchored(obj)
    snap = _build(obj)
    return replace(snap, dropped_fields=dropped) if dropped else snap


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
    dropped = tuple(
        f"identity.{k}" for k in IDENTITY_FIELDS
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
    )


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
    retired = {
        k: int(v) for k, v in (off.get("retired_leaves") or {}).items() if k in ("row", "page")
    }
    resident = off.get("resident") or {}
    lookups = None
    if (raw_lookups := off.get("lookups")) is not None:
        misses = raw_lookups.get("misses")
        lookups = Lookups(
            total=int(raw_lookups["total"]),
            hits=_opt_int(raw_lookups, "hits"),
            misses=None if misses is None else {str(k): int(v) for k, v in misses.items()},
        )
    host = None
    if (raw_host := off.get("host")) is not None:
        host = HostTier(
            _opt_int(raw_host, "stores"),
            _opt_int(raw_host, "tokens_restored"),
            _opt_int(raw_host, "prompt_tokens_reused"),
        )
    return Offload(
        budget_bytes=_opt_int(off, "budget_bytes"),
        slabs=slabs,
        resident_records=_opt_int(resident, "records"),
        resident_bytes=_opt_int(resident, "bytes"),
        evictions=evictions,
        retired_leaves=retired,
        ancestor_row_compactions=_opt_int(off, "ancestor_row_compactions"),
        lookups=lookups,
        host=host,
        fields=copy.deepcopy(off),  # the caller's object may change; this observation not
    )
