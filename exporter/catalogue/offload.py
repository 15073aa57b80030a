"""Families of the offload collector: the engine's identity and the offload tier, from the snapshot.

A row with a `field` under `offload` is read from the snapshot by that path (model.path_reader):
the offload collector renders it and exporter.cycle.derive checks its counters for regressions, so a
new field of the schema is one row here.
"""

from __future__ import annotations

from exporter.catalogue.model import Family, Promise, Rows, Samples
from exporter.labels import (
    EVICTED_BY,
    EVICTION_OUTCOMES,
    IDENTITY_FIELDS,
    MISS_REASONS,
    PRESSURES,
    SLAB_KINDS,
    STORE_OUTCOMES,
    TOKEN_SOURCES,
    miss_counts,
)
from exporter.snapshot.model import Offload

G = "generation"
OFFLOAD = Promise("4.1")
V3 = Promise("4.1", 3)  # schema 3's additions: absent for an engine of schema 1
# Buckets kept per histogram series, +Inf included (at most 60 series per engine for all of v3:
# docs/scale.md): the restore transfers' 8, each eviction histogram's 5.
RESTORE_BUCKETS = 8
EVICTION_BUCKETS = 5
ENGINE = Promise("4.2")


def _blocked(off: Offload) -> Samples | None:
    blocked = off.fields.get("lookups", {}).get("blocked_tokens")
    if blocked is None:
        return None
    return {(reason,): blocked.get(reason, 0) for reason in MISS_REASONS}


FAMILIES: Rows = (
    Family("helios_engine_up", "gauge", (), "", help="1 when the latest poll of the engine "
           "snapshot succeeded.", collector="offload", promised=ENGINE,
           source="1 when the latest snapshot poll succeeded, 0 when it failed; absent until the "
           "first poll finished (unknown is not down)"),
    Family("helios_monitoring_generation_info", "gauge", (G, *IDENTITY_FIELDS), "",
           help="Engine incarnation being monitored (snapshot generation and identity); always 1.",
           collector="offload", promised=ENGINE,
           source="always 1: who the current incarnation is (`generation`, `identity`)"),
    Family("helios_monitoring_generation_start_timestamp_seconds", "gauge", (G,), "unix seconds",
           help="Snapshot started_at: when this engine incarnation started (unix seconds).",
           collector="offload", promised=ENGINE, source="`started_at`"),
    Family("helios_engine_ranks", "gauge", (G,), "ranks", help="Number of entries in the "
           "snapshot's ranks (2 for TP2).", collector="offload", promised=Promise("4.2", 2),
           source="the number of entries in `ranks` (2 for TP2)"),
    Family("helios_engine_admission_open", "gauge", (G,), "", help="1 when snapshot "
           "admission.state is open, else 0 (draining or closed).", collector="offload",
           promised=ENGINE, source="1 while `admission.state` is `open`"),
    Family("helios_engine_inflight_requests", "gauge", (G,), "requests", help="Snapshot "
           "admission.inflight_requests; during a restore window, the last value seen before "
           "the engine went away.", collector="offload", promised=ENGINE,
           source="`admission.inflight_requests` (during a restore window, the last value seen "
           "before the engine went away)"),
    # The offload tier, in exposition order.
    Family("helios_offload_slab_capacity", "gauge", (G, "kind"), "records", help="Snapshot "
           "offload.slabs.<kind>.capacity: records the slab holds.", collector="offload",
           promised=OFFLOAD, values={"kind": SLAB_KINDS}, field="offload.slabs.<kind>.capacity"),
    Family("helios_offload_slab_free", "gauge", (G, "kind"), "records", help="Snapshot "
           "offload.slabs.<kind>.free: records free now.", collector="offload", promised=OFFLOAD,
           values={"kind": SLAB_KINDS}, field="offload.slabs.<kind>.free"),
    Family("helios_offload_slab_record_bytes", "gauge", (G, "kind"), "bytes", help="Snapshot "
           "offload.slabs.<kind>.record_bytes: bytes per record.", collector="offload",
           promised=OFFLOAD, values={"kind": SLAB_KINDS}, field="offload.slabs.<kind>.record_bytes"),
    Family("helios_offload_budget_bytes", "gauge", (G,), "bytes", help="Snapshot "
           "offload.budget_bytes: host bytes carved into rows and pages.", collector="offload",
           promised=OFFLOAD, field="offload.budget_bytes"),
    Family("helios_offload_resident_records", "gauge", (G,), "records", help="Snapshot "
           "offload.resident.records: records resident in the host tier.", collector="offload",
           promised=OFFLOAD, field="offload.resident.records"),
    Family("helios_offload_resident_bytes", "gauge", (G,), "bytes", help="Snapshot "
           "offload.resident.bytes: bytes resident in the host tier.", collector="offload",
           promised=OFFLOAD, field="offload.resident.bytes"),
    Family("helios_offload_eviction_attempts_total", "counter", (G, "pressure"), "attempts",
           help="Snapshot offload.evictions.<pressure>.attempts: eviction requests made under "
           "row or page pressure.", collector="offload", promised=OFFLOAD,
           values={"pressure": PRESSURES}, field="offload.evictions.<pressure>.attempts"),
    Family("helios_offload_eviction_outcomes_total", "counter", (G, "pressure", "outcome"),
           "attempts", help="Snapshot offload.evictions.<pressure>.<outcome>: how attempts "
           "ended.", collector="offload", promised=OFFLOAD,
           values={"pressure": PRESSURES, "outcome": EVICTION_OUTCOMES},
           field="offload.evictions.<pressure>.<outcome>"),
    Family("helios_offload_retired_leaves_total", "counter", (G, "kind"), "records",
           help="Snapshot offload.retired_leaves.<kind>: rows/pages freed by retiring leaves.",
           collector="offload", promised=OFFLOAD, values={"kind": SLAB_KINDS},
           field="offload.retired_leaves.<kind>"),
    Family("helios_offload_ancestor_compactions_total", "counter", (G,), "rows",
           help="Snapshot offload.ancestor_row_compactions: single-child ancestor rows "
           "compacted.", collector="offload", promised=OFFLOAD,
           field="offload.ancestor_row_compactions"),
    Family("helios_offload_lookups_total", "counter", (G,), "lookups",
           help="Snapshot offload.lookups.total.", collector="offload", promised=OFFLOAD,
           field="offload.lookups.total"),
    Family("helios_offload_lookup_hits_total", "counter", (G,), "lookups",
           help="Snapshot offload.lookups.hits.", collector="offload", promised=OFFLOAD,
           field="offload.lookups.hits"),
    Family("helios_offload_lookup_misses_total", "counter", (G, "reason"), "lookups",
           help="Snapshot offload.lookups.misses, keys mapped onto a closed reason set (text "
           "before the first ':'; unknown keys become other).", collector="offload",
           promised=OFFLOAD, labels_doc="generation, reason (section 1.1's closed set and "
           "`other`)", field="offload.lookups.misses.<reason>",
           read=lambda o: None if o.lookups is None or o.lookups.misses is None else {
               (reason,): n for reason, n in miss_counts(o.lookups.misses).items()},
           source="`offload.lookups.misses`, each key mapped onto its reason (the text before "
           "the first `:`; an unknown one is `other`)"),
    Family("helios_offload_geometry_consistent", "gauge", (G,), "", help="1 when the snapshot's "
           "offload arithmetic holds: slabs' capacity x record_bytes within budget_bytes, "
           "resident.bytes within budget_bytes, lookups hits + misses within lookups.total, and "
           "with --expect-layout each slab's record_bytes as the layout derives it (the rules "
           "checked are those whose fields the snapshot has; /status names a failed one).",
           collector="offload", promised=Promise("4.1", 2),
           source="derived: 1 while the snapshot's byte arithmetic holds: row and page capacity "
           "times record bytes together within `budget_bytes`, resident bytes within the budget, "
           "hits plus misses not above lookups, and *(v3)* with `--expect-layout` each slab's "
           "record bytes as the layout derives them; 0 otherwise (`/status` says which rule "
           "failed)"),
    Family("helios_offload_host_stores_total", "counter", (G,), "stores",
           help="Snapshot offload.host.stores.", collector="offload", promised=OFFLOAD,
           field="offload.host.stores"),
    Family("helios_offload_host_tokens_restored_total", "counter", (G,), "tokens",
           help="Snapshot offload.host.tokens_restored: tokens restored from the host tier.",
           collector="offload", promised=OFFLOAD, field="offload.host.tokens_restored"),
    Family("helios_offload_prompt_tokens_reused_total", "counter", (G,), "tokens",
           help="Snapshot offload.host.prompt_tokens_reused.", collector="offload",
           promised=OFFLOAD, field="offload.host.prompt_tokens_reused"),
    # Schema 3's additions (section 1.2), each absent until the engine sends it.
    Family("helios_offload_host_store_outcomes_total", "counter", (G, "outcome"), "stores",
           help="Snapshot offload.host.store_outcomes.<outcome>: checkpoint stores by how they "
           "ended (stored; dropped_full, no record could be freed; dropped_ineligible, can never "
           "be stored; failed, a host copy error).", collector="offload", promised=V3,
           values={"outcome": STORE_OUTCOMES}, field="offload.host.store_outcomes.<outcome>"),
    Family("helios_offload_host_stored_bytes_total", "counter", (G,), "bytes",
           help="Snapshot offload.host.stored_bytes: bytes written to host records by stored "
           "outcomes.", collector="offload", promised=V3, field="offload.host.stored_bytes"),
    Family("helios_offload_host_restore_transfer_bytes_total", "counter", (G,), "bytes",
           help="Snapshot offload.host.restore_transfers.bytes: bytes copied from the host tier "
           "to the GPU by hits.", collector="offload", promised=V3,
           field="offload.host.restore_transfers.bytes"),
    Family("helios_offload_host_restore_transfer_seconds", "histogram", (G,), "seconds",
           help="Snapshot offload.host.restore_transfers: seconds each host-to-GPU copy of a "
           "hit took (count: the transfers; at most 8 of the engine's buckets).",
           collector="offload", promised=V3, field="offload.host.restore_transfers",
           max_buckets=RESTORE_BUCKETS,
           source="`offload.host.restore_transfers` (`count`, `seconds_sum`, `seconds_buckets`: "
           f"at most {RESTORE_BUCKETS} of its buckets, `+Inf` included)"),
    Family("helios_offload_eviction_age_seconds", "histogram", (G, "pressure"), "seconds",
           help="Snapshot offload.evictions.<pressure>.age_seconds: each evicted checkpoint's "
           "age, from its store to its eviction (at most 5 of the engine's buckets).",
           collector="offload", promised=V3, values={"pressure": PRESSURES},
           field="offload.evictions.<pressure>.age_seconds", max_buckets=EVICTION_BUCKETS,
           source="`offload.evictions.<pressure>.age_seconds` (at most "
           f"{EVICTION_BUCKETS} of its buckets, `+Inf` included)"),
    Family("helios_offload_eviction_idle_seconds", "histogram", (G, "pressure"), "seconds",
           help="Snapshot offload.evictions.<pressure>.idle_seconds: for each evicted checkpoint "
           "that had served a hit, the time since its last hit (at most 5 of the engine's "
           "buckets).", collector="offload", promised=V3, values={"pressure": PRESSURES},
           field="offload.evictions.<pressure>.idle_seconds", max_buckets=EVICTION_BUCKETS,
           source="`offload.evictions.<pressure>.idle_seconds` (at most "
           f"{EVICTION_BUCKETS} of its buckets, `+Inf` included); its count short of the age's "
           "is the checkpoints evicted without ever being hit"),
    Family("helios_offload_lookup_blocked_tokens_total", "counter", (G, "reason"), "tokens",
           help="Snapshot offload.lookups.blocked_tokens.<reason>: prompt tokens that misses of "
           "that reason left to be computed.", collector="offload", promised=V3,
           values={"reason": MISS_REASONS}, field="offload.lookups.blocked_tokens.<reason>",
           read=_blocked, source="`offload.lookups.blocked_tokens.<reason>` (a reason the "
           "engine leaves out is 0, as for the misses)"),
    Family("helios_offload_lookup_evicted_misses_total", "counter", (G, "evicted_by"), "lookups",
           help="Snapshot offload.lookups.evicted_by.<evicted_by>: evicted misses by the "
           "eviction that took their checkpoint.", collector="offload", promised=V3,
           values={"evicted_by": EVICTED_BY}, field="offload.lookups.evicted_by.<evicted_by>"),
    Family("helios_offload_prompt_tokens_total", "counter", (G, "source"), "tokens",
           help="Snapshot offload.prompt_tokens.<source>: prompt tokens looked up, by where "
           "they came from (computed, gpu_prefix, host_restored); their sum is every prompt "
           "token looked up.", collector="offload", promised=V3,
           values={"source": TOKEN_SOURCES}, field="offload.prompt_tokens.<source>"),
    Family("helios_offload_geometry_page_tokens", "gauge", (G,), "tokens",
           help="Snapshot offload.geometry.page_tokens: tokens in one KV page.",
           collector="offload", promised=V3, field="offload.geometry.page_tokens"),
    Family("helios_offload_geometry_row_checkpoint_interval_tokens", "gauge", (G,), "tokens",
           help="Snapshot offload.geometry.row_checkpoint_interval_tokens: row checkpoints sit "
           "only at multiples of this many prompt tokens.", collector="offload", promised=V3,
           field="offload.geometry.row_checkpoint_interval_tokens"),
    Family("helios_offload_geometry_min_reusable_tokens", "gauge", (G,), "tokens",
           help="Snapshot offload.geometry.min_reusable_tokens: the shortest prompt any "
           "checkpoint can serve.", collector="offload", promised=V3,
           field="offload.geometry.min_reusable_tokens"),
    Family("helios_offload_row_pressure_with_page_headroom_total", "counter", (G,), "attempts",
           help="Row-pressure eviction attempts (offload.evictions.row.attempts deltas between "
           "polls) seen while the page slab had at least 25% free at both polls.",
           collector="offload", promised=OFFLOAD,
           source="derived: row-pressure eviction attempts between two polls while at least 25% "
           "of the page slab was free at both, the counter evidence an allocator change needs"),
)
