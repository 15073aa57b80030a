"""The snapshot's shape, in one place: the JSON Schema of every snapshot version as one source,
`SOURCE`, the newest version with each addition marked by the version that added it (`V3(...)`).
Schema 3 is schema 1 plus its additions; a field of a later version is one more marker.

Everything else is derived from it (exporter/snapshot/schemas.py): each version's schema, which
the sidecar validates with, the files exporter/schema/snapshot-v<N>.schema.json that
`scripts/generate snapshot-schema` writes for engine authors (docs/snapshot.md shows them), the
v3 sections and the histograms' keys. tests/exporter/snapshot/test_schemas.py holds every field the metric
catalogue reads to the schema of each version that promises it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, get_args

# The closed sets a field's keys come from: one home, exporter/labels.py.
from exporter.labels import (
    EVICTED_BY,
    EVICTION_OUTCOMES,
    IDENTITY_FIELDS,
    MISS_REASONS,
    PRESSURES,
    SLAB_KINDS,
    STORE_OUTCOMES,
    TOKEN_SOURCES,
)
from exporter.snapshot.model import AdmissionState

SCHEMA_VERSIONS: Final = (1, 3)  # what the sidecar reads (there is no 2)


@dataclass(frozen=True)
class Since:
    """A field (or a description) added by schema `version`: absent from the earlier ones."""

    version: int
    value: Any


def V3(value: Any) -> Since:
    return Since(3, value)


def _each(keys: tuple[str, ...], definition: str) -> dict[str, Any]:
    """A property of the `definition` for each key of a closed set, in its order."""
    return {key: {"$ref": f"#/$defs/{definition}"} for key in keys}


# Replaced by each version's `schema_version` constant.
VERSION: Final = object()
DESCRIPTION: Final = {
    1: (
        "GET /debug/offload/snapshot. Counters are cumulative since this engine incarnation started. "
        "Unknown fields are ignored; a missing section leaves its metrics absent."
    ),
    3: (
        "GET /debug/offload/snapshot. Schema 1 with more of the host tier, every addition optional: "
        "host.store_outcomes, host.stored_bytes, host.restore_transfers, evictions.<pressure>.age_seconds "
        "and .idle_seconds, lookups.blocked_tokens, lookups.evicted_by, geometry and prompt_tokens "
        "(docs/snapshot.md, 'Schema v3'). There is no schema_version 2 (interface version 2 kept schema "
        "1). Counters are cumulative since this engine incarnation started; a histogram's buckets are "
        "cumulative, keyed by their upper bound in seconds, and end with \"+Inf\", which equals its count. "
        "Unknown fields are ignored; a missing section leaves its metrics absent. A section, when present, "
        "carries every field it requires."
    ),
}

SOURCE: dict[str, Any] = {
    "type": "object",
    "required": ["schema_version"],
    "$defs": {
        "count": {"type": "integer", "minimum": 0, "maximum": 9007199254740991},
        "positive": V3({"type": "integer", "minimum": 1, "maximum": 9007199254740991}),
        "seconds": V3({"type": "number", "minimum": 0}),
        "buckets": V3({
            "description": (
                "Cumulative counts of observations at or below each upper bound, keyed by the bound (a "
                "decimal number, as Prometheus writes le, e.g. \"0.005\", \"10.0\") and \"+Inf\". Counts "
                "do not decrease as the bound grows; \"+Inf\" equals the histogram's count. The same "
                "bounds in every snapshot of an incarnation."
            ),
            "type": "object",
            "required": ["+Inf"],
            "minProperties": 1,
            "maxProperties": 32,
            "propertyNames": {"pattern": "^(\\+Inf|(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?)$"},
            "additionalProperties": {"$ref": "#/$defs/count"},
        }),
        "histogram": V3({
            "description": "Seconds observed at eviction: count, sum (seconds) and cumulative buckets.",
            "type": "object",
            "required": ["count", "sum", "buckets"],
            "properties": {
                "count": {"$ref": "#/$defs/count"},
                "sum": {"$ref": "#/$defs/seconds"},
                "buckets": {"$ref": "#/$defs/buckets"},
            },
        }),
        "label": {"type": "string", "pattern": "^[A-Za-z0-9._:@/+=-]{1,128}$"},
        "slab": {
            "type": "object",
            "required": ["capacity", "free", "record_bytes"],
            "properties": {
                "capacity": {"$ref": "#/$defs/count"},
                "free": {"$ref": "#/$defs/count"},
                "record_bytes": {"$ref": "#/$defs/count"},
            },
        },
        "evictions": {
            "description": V3(
                "Eviction attempts under one pressure and how they ended. v3: age_seconds, for each "
                "evicted attempt the seconds from the evicted checkpoint's store completing to its "
                "eviction (count equals evicted); idle_seconds, for each evicted checkpoint that had "
                "served a lookup hit, the seconds since its last hit (count at most age_seconds' count: "
                "the difference were never hit)."
            ),
            "type": "object",
            "required": ["attempts"],
            "properties": {
                "attempts": {"$ref": "#/$defs/count"},
                **_each(EVICTION_OUTCOMES, "count"),
                "age_seconds": V3({"$ref": "#/$defs/histogram"}),
                "idle_seconds": V3({"$ref": "#/$defs/histogram"}),
            },
        },
    },
    "properties": {
        "schema_version": {"const": VERSION},
        "generation": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
        "started_at": {"type": "number", "minimum": 0, "maximum": 32503680000},
        "identity": {
            "type": "object",
            "properties": {
                **_each(IDENTITY_FIELDS, "label"),
                "engine": V3({"$ref": "#/$defs/label"}),
            },
        },
        "admission": {
            "type": "object",
            "required": ["state"],
            "properties": {
                "state": {"enum": list(get_args(AdmissionState))},
                "inflight_requests": {"$ref": "#/$defs/count"},
            },
        },
        "ranks": {
            "type": "array",
            "maxItems": 64,
            "items": {
                "type": "object",
                "required": ["rank", "gpu_uuid"],
                "properties": {
                    "rank": {"type": "integer", "minimum": 0, "maximum": 1023},
                    "gpu_uuid": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,96}$"},
                },
            },
        },
        "offload": {
            "type": "object",
            "properties": {
                "budget_bytes": {"$ref": "#/$defs/count"},
                "slabs": {
                    "type": "object",
                    "properties": _each(SLAB_KINDS, "slab"),
                },
                "resident": {
                    "type": "object",
                    "properties": {
                        "records": {"$ref": "#/$defs/count"},
                        "bytes": {"$ref": "#/$defs/count"},
                    },
                },
                "evictions": {
                    "type": "object",
                    "properties": _each(PRESSURES, "evictions"),
                },
                "retired_leaves": {
                    "type": "object",
                    "properties": _each(SLAB_KINDS, "count"),
                },
                "ancestor_row_compactions": {"$ref": "#/$defs/count"},
                "lookups": {
                    "type": "object",
                    "required": ["total"],
                    "properties": {
                        "total": {"$ref": "#/$defs/count"},
                        "hits": {"$ref": "#/$defs/count"},
                        "misses": {
                            "type": "object",
                            "maxProperties": 100000,
                            "additionalProperties": {"$ref": "#/$defs/count"},
                        },
                        "blocked_tokens": V3({
                            "description": (
                                "v3. Prompt tokens that misses left to be computed, by miss reason on the "
                                "closed set (a raw miss key cut at its first ':' and mapped, any other "
                                "reason as other): for each missed lookup, its prompt tokens less those "
                                "found on the GPU. A reason has tokens only if it has misses; the sum is "
                                "at most prompt_tokens.computed (hits compute tokens too); "
                                "blocked_tokens.too_short is at most misses(too_short) x "
                                "(geometry.min_reusable_tokens - 1)."
                            ),
                            "type": "object",
                            "propertyNames": {"enum": list(MISS_REASONS)},
                            "additionalProperties": {"$ref": "#/$defs/count"},
                        }),
                        "evicted_by": V3({
                            "description": (
                                "v3. The evicted misses by the eviction that took the checkpoint they "
                                "would have hit: row, its leaf retired under row pressure; page, its leaf "
                                "retired under page pressure; ancestor_compaction, its row compacted away "
                                "under row pressure. The three sum to the misses whose reason maps to "
                                "evicted."
                            ),
                            "type": "object",
                            "required": list(EVICTED_BY),
                            "properties": _each(EVICTED_BY, "count"),
                        }),
                    },
                },
                "host": {
                    "description": V3(
                        "The host tier's stores and restores. v3 adds store_outcomes, restore_transfers "
                        "and stored_bytes: the bytes written to host records by the stored outcomes (a row "
                        "and the new pages of each), 0 while stored is 0."
                    ),
                    "type": "object",
                    "properties": {
                        "stores": {"$ref": "#/$defs/count"},
                        "tokens_restored": {"$ref": "#/$defs/count"},
                        "prompt_tokens_reused": {"$ref": "#/$defs/count"},
                        "store_outcomes": V3({
                            "description": (
                                "v3. Every checkpoint store the engine chose to make, once it has ended, "
                                "by outcome: stored, written and durable (equals stores); dropped_full, "
                                "not made because no record could be freed (every eviction attempt for it "
                                "ended other than evicted); dropped_ineligible, refused because it can "
                                "never be stored (a prompt too short for any checkpoint, one per such "
                                "prompt, or a checkpoint larger than the tier can hold); failed, begun but "
                                "not completed (a host copy error), its records freed. A store in flight "
                                "is in none; a checkpoint already resident is not stored again and is in "
                                "none."
                            ),
                            "type": "object",
                            "required": list(STORE_OUTCOMES),
                            "properties": _each(STORE_OUTCOMES, "count"),
                        }),
                        "stored_bytes": V3({"$ref": "#/$defs/count"}),
                        "restore_transfers": V3({
                            "description": (
                                "v3. Host-to-GPU copies of a hit's records, one per lookup hit that "
                                "restored tokens (count at most lookups.hits; 0 exactly when "
                                "tokens_restored is 0): their bytes, and the seconds each copy took as a "
                                "sum and cumulative buckets (\"+Inf\" equals count). bytes / seconds_sum "
                                "is the restore bandwidth."
                            ),
                            "type": "object",
                            "required": ["count", "bytes", "seconds_sum", "seconds_buckets"],
                            "properties": {
                                "count": {"$ref": "#/$defs/count"},
                                "bytes": {"$ref": "#/$defs/count"},
                                "seconds_sum": {"$ref": "#/$defs/seconds"},
                                "seconds_buckets": {"$ref": "#/$defs/buckets"},
                            },
                        }),
                    },
                },
                "geometry": V3({
                    "description": (
                        "v3. What can be reused at all, from the engine's configuration (constant for an "
                        "incarnation): page_tokens, tokens in one KV page (one block of the prefix index); "
                        "row_checkpoint_interval_tokens, row checkpoints (the recurrent state a reuse "
                        "resumes from) sit only at multiples of this many prompt tokens; "
                        "min_reusable_tokens, the shortest prompt any checkpoint can serve (a shorter one "
                        "misses as too_short), row_checkpoint_interval_tokens + 1 where the last prompt "
                        "token is always computed."
                    ),
                    "type": "object",
                    "required": ["page_tokens", "row_checkpoint_interval_tokens", "min_reusable_tokens"],
                    "properties": {
                        "page_tokens": {"$ref": "#/$defs/positive"},
                        "row_checkpoint_interval_tokens": {"$ref": "#/$defs/positive"},
                        "min_reusable_tokens": {"$ref": "#/$defs/positive"},
                    },
                }),
                "prompt_tokens": V3({
                    "description": (
                        "v3. The prompt tokens of every looked-up request, by where they came from, "
                        "counted at the lookup: computed (prefill), gpu_prefix (found in the GPU-resident "
                        "prefix cache), host_restored (copied from the host tier; equals "
                        "host.tokens_restored). gpu_prefix + host_restored equals "
                        "host.prompt_tokens_reused; the three sum to the prompt tokens looked up, the "
                        "denominator of every tier's share."
                    ),
                    "type": "object",
                    "required": list(TOKEN_SOURCES),
                    "properties": _each(TOKEN_SOURCES, "count"),
                }),
            },
        },
    },
}
