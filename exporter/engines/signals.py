"""The catalogue's signals an engine's mapping can fill: each one a place in the snapshot's
`offload` section, read from there by the catalogue's own rows (exporter/catalogue/offload.py),
so a mapped engine's values reach the same families, dashboards and alerts as Helios's.

A signal is one catalogue family, or one label value of it (`slab_free.page`); its name is a
label value of `helios_engine_signal_coverage{signal}` (exporter.labels.ENGINE_SIGNALS). The
families that are not in `offload` (admission, ranks, identity) are said too: a mapping says
they are absent, so the docs and the coverage name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from exporter.labels import ENGINE_SIGNALS

Kind = Literal["gauge", "counter", "histogram"]


@dataclass(frozen=True, slots=True)
class Signal:
    name: str
    family: str  # the catalogue family it fills
    path: str | None  # its place in the snapshot's `offload` section; None: outside it
    kind: Kind


def _s(name: str, family: str, path: str | None, kind: Kind = "counter") -> Signal:
    return Signal(name, "helios_" + family, path, kind)


SIGNALS: Final = (
    _s("slab_capacity.row", "offload_slab_capacity", "slabs.row.capacity", "gauge"),
    _s("slab_free.row", "offload_slab_free", "slabs.row.free", "gauge"),
    _s("slab_capacity.page", "offload_slab_capacity", "slabs.page.capacity", "gauge"),
    _s("slab_free.page", "offload_slab_free", "slabs.page.free", "gauge"),
    _s("slab_record_bytes", "offload_slab_record_bytes", "slabs.<kind>.record_bytes", "gauge"),
    _s("budget_bytes", "offload_budget_bytes", "budget_bytes", "gauge"),
    _s("resident_records", "offload_resident_records", "resident.records", "gauge"),
    _s("resident_bytes", "offload_resident_bytes", "resident.bytes", "gauge"),
    _s("eviction_attempts", "offload_eviction_attempts_total", "evictions.<pressure>.attempts"),
    _s("eviction_outcomes", "offload_eviction_outcomes_total", "evictions.<pressure>.<outcome>"),
    _s("retired_leaves", "offload_retired_leaves_total", "retired_leaves.<kind>"),
    _s("ancestor_compactions", "offload_ancestor_compactions_total", "ancestor_row_compactions"),
    _s("lookups", "offload_lookups_total", "lookups.total"),
    _s("lookup_hits", "offload_lookup_hits_total", "lookups.hits"),
    _s("lookup_misses", "offload_lookup_misses_total", "lookups.misses.<reason>"),
    _s("host_stores", "offload_host_stores_total", "host.stores"),
    _s("host_tokens_restored", "offload_host_tokens_restored_total", "host.tokens_restored"),
    _s("prompt_tokens_reused", "offload_prompt_tokens_reused_total", "host.prompt_tokens_reused"),
    _s("store_outcomes.stored", "offload_host_store_outcomes_total",
       "host.store_outcomes.stored"),
    _s("store_outcomes.dropped_full", "offload_host_store_outcomes_total",
       "host.store_outcomes.dropped_full"),
    _s("store_outcomes.dropped_ineligible", "offload_host_store_outcomes_total",
       "host.store_outcomes.dropped_ineligible"),
    _s("store_outcomes.failed", "offload_host_store_outcomes_total",
       "host.store_outcomes.failed"),
    _s("stored_bytes", "offload_host_stored_bytes_total", "host.stored_bytes"),
    _s("restore_transfer_bytes", "offload_host_restore_transfer_bytes_total",
       "host.restore_transfers.bytes"),
    _s("restore_transfer_seconds", "offload_host_restore_transfer_seconds",
       "host.restore_transfers", "histogram"),
    _s("eviction_age_seconds", "offload_eviction_age_seconds",
       "evictions.<pressure>.age_seconds", "histogram"),
    _s("eviction_idle_seconds", "offload_eviction_idle_seconds",
       "evictions.<pressure>.idle_seconds", "histogram"),
    _s("lookup_blocked_tokens", "offload_lookup_blocked_tokens_total",
       "lookups.blocked_tokens.<reason>"),
    _s("lookup_evicted_misses", "offload_lookup_evicted_misses_total",
       "lookups.evicted_by.<evicted_by>"),
    _s("prompt_tokens.computed", "offload_prompt_tokens_total", "prompt_tokens.computed"),
    _s("prompt_tokens.gpu_prefix", "offload_prompt_tokens_total", "prompt_tokens.gpu_prefix"),
    _s("prompt_tokens.host_restored", "offload_prompt_tokens_total",
       "prompt_tokens.host_restored"),
    _s("page_tokens", "offload_geometry_page_tokens", "geometry.page_tokens", "gauge"),
    _s("row_checkpoint_interval_tokens", "offload_geometry_row_checkpoint_interval_tokens",
       "geometry.row_checkpoint_interval_tokens", "gauge"),
    _s("min_reusable_tokens", "offload_geometry_min_reusable_tokens",
       "geometry.min_reusable_tokens", "gauge"),
    _s("admission", "engine_admission_open", None, "gauge"),
    _s("inflight_requests", "engine_inflight_requests", None, "gauge"),
    _s("ranks", "engine_ranks", None, "gauge"),
    _s("generation", "monitoring_generation_info", None, "gauge"),
)
BY_NAME: Final = {s.name: s for s in SIGNALS}

if tuple(BY_NAME) != ENGINE_SIGNALS:  # one closed set: a new signal needs its label value
    raise AssertionError(f"SIGNALS {tuple(BY_NAME)} != ENGINE_SIGNALS {ENGINE_SIGNALS}")
