"""Recording rules for dashboards (alerts/helios-recording.yaml), one function per rule group.

All drop `generation` so that dashboard series continue across a restore.
"""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, indent, join, ratio
from alerts.rules import Record

# (counter without _total, what the labels mean) of the per-second offload rates.
OFFLOAD_RATES = (
    ("offload_lookups", ""),
    ("offload_lookup_hits", ""),
    ("offload_lookup_misses", " per `reason`"),
    ("offload_eviction_attempts", " per `pressure` (row, page)"),
    ("offload_eviction_outcomes", " per `pressure` and `outcome`"),
    ("offload_row_pressure_with_page_headroom", ""),
    ("offload_retired_leaves", " per `kind`"),
    ("offload_ancestor_compactions", ""),
    ("offload_host_stores", ""),
    ("offload_host_tokens_restored", ""),
    ("offload_prompt_tokens_reused", ""),
)


# Per-request figures the engine team quotes ("prompt tokens reused per request", ...): offload
# counter over finished requests. Finished requests come from the count of the engine's
# end-to-end latency histogram: every engine observes each finished request there exactly once
# (SGLang, vLLM, the simulator), while a requests counter is engine-specific (absent from the
# SGLang output in tests/fixtures/real) and offload lookups are not requests (a prompt too short
# to look up makes none, an engine may look up per chunk).
PER_REQUEST = ("offload_prompt_tokens_reused", "offload_host_stores", "offload_host_tokens_restored")
REQUESTS_SOURCE = "helios_engine_native_e2e_request_latency_seconds_count"


# The rows the free page bytes could hold (the offload dashboard's panel beside row pressure).
ROWS_IN_FREE_PAGES = "helios:offload_rows_in_free_page_bytes:floor"


def rate_name(c: Config, metric: str) -> str:
    return f"helios:{metric}:rate{c.rate_window}"


def requests_name(c: Config) -> str:
    return f"helios:engine_requests_finished:rate{c.rate_window}"


# Rule groups of the offload recording rules. Prometheus evaluates groups concurrently and the
# rules of one group in order, so at 1,000 engines one group of all twenty took over half a
# second per evaluation on the benchmark machine (docs/scale.md); split by subject, each stays
# well under 200 ms. A ratio is in the group of its numerator; a denominator recorded in another
# group is read as of that group's last evaluation (within one interval).
GROUP_SLABS_LOOKUPS = "helios-offload.rules"
GROUP_MISSES = "helios-offload-misses.rules"
GROUP_EVICTIONS = "helios-offload-evictions.rules"
GROUP_PRESSURE = "helios-offload-pressure.rules"
GROUP_REQUESTS = "helios-offload-requests.rules"
RATE_GROUPS = {
    "offload_lookups": GROUP_SLABS_LOOKUPS,
    "offload_lookup_hits": GROUP_SLABS_LOOKUPS,
    "offload_lookup_misses": GROUP_MISSES,
    "offload_eviction_attempts": GROUP_PRESSURE,
    "offload_eviction_outcomes": GROUP_EVICTIONS,
    "offload_row_pressure_with_page_headroom": GROUP_PRESSURE,
    "offload_retired_leaves": GROUP_PRESSURE,
    "offload_ancestor_compactions": GROUP_PRESSURE,
    "offload_host_stores": GROUP_REQUESTS,
    "offload_host_tokens_restored": GROUP_REQUESTS,
    "offload_prompt_tokens_reused": GROUP_REQUESTS,
}
# Schema v3's host-tier figures (a v1 engine exports none of their inputs: no series), three
# groups: at 1,000 engines and a 15 s scrape each reads at most about 140,000 raw samples per
# evaluation (blocked tokens: 7 reasons x 20 samples per engine; stores: 4 outcomes and 2
# transfer series; tokens: 3 sources), as much as helios-offload-misses.rules does.
GROUP_STORES = "helios-offload-stores.rules"
GROUP_TOKENS = "helios-offload-tokens.rules"
GROUP_BLOCKED = "helios-offload-blocked.rules"
GROUP_ORDER = (GROUP_SLABS_LOOKUPS, GROUP_MISSES, GROUP_EVICTIONS, GROUP_PRESSURE, GROUP_REQUESTS,
               GROUP_STORES, GROUP_TOKENS, GROUP_BLOCKED)
PROMPT_TOKENS = "helios:offload_prompt_tokens:rate{}"


def offload(c: Config) -> list[Record]:
    q = Q(c)
    rw = str(c.rate_window)
    group = GROUP_SLABS_LOOKUPS
    records = [
        Record(
            "helios:offload_slab_free:ratio",
            group,
            "max without (generation) (\n"
            + indent(ratio(q.sel("helios_offload_slab_free"), q.sel("helios_offload_slab_capacity")))
            + "\n)",
            "Free records / capacity per slab `kind` (row, page), 0-1.",
        ),
        Record(
            "helios:offload_budget_used:ratio",
            group,
            "max without (generation) (\n"
            + indent(
                ratio(q.sel("helios_offload_resident_bytes"), q.sel("helios_offload_budget_bytes"))
            )
            + "\n)",
            "Resident bytes / host offload budget, 0-1.",
        ),
    ]
    for metric, extra in OFFLOAD_RATES:
        records.append(
            Record(
                rate_name(c, metric),
                RATE_GROUPS[metric],
                q.rate(f"helios_{metric}_total"),
                f"Per-second rate of `helios_{metric}_total`{extra}, summed over generations.",
            )
        )
    records += [
        Record(
            f"helios:offload_lookup_hit:ratio_rate{rw}",
            group,
            ratio(
                q.sel(rate_name(c, "offload_lookup_hits")), q.sel(rate_name(c, "offload_lookups"))
            ),
            "Lookup hit ratio, 0-1 (absent while there are no lookups).",
        ),
        Record(
            f"helios:offload_eviction_evicted:ratio_rate{rw}",
            GROUP_EVICTIONS,
            f"{q.sel(rate_name(c, 'offload_eviction_outcomes'), outcome='evicted')}\n"
            "/ ignoring (outcome)\n"
            f"({q.sel(rate_name(c, 'offload_eviction_attempts'))} > 0)",
            "Share of eviction attempts that evicted something, per `pressure`.",
        ),
        Record(
            f"helios:offload_row_pressure_with_page_headroom:ratio_rate{rw}",
            GROUP_PRESSURE,
            f"{q.sel(rate_name(c, 'offload_row_pressure_with_page_headroom'))}\n"
            "/ ignoring (pressure)\n"
            f"({q.sel(rate_name(c, 'offload_eviction_attempts'), pressure='row')} > 0)",
            "Share of row-pressure eviction attempts made while the page slab had headroom.",
        ),
        Record(
            ROWS_IN_FREE_PAGES,
            GROUP_PRESSURE,
            "max without (generation) (\n"
            + indent(
                "floor(\n"
                + indent(
                    f"({q.sel('helios_offload_slab_free', kind='page')}\n"
                    f" * {q.sel('helios_offload_slab_record_bytes', kind='page')})\n"
                    "/ ignoring (kind)\n"
                    f"{q.sel('helios_offload_slab_record_bytes', kind='row')}"
                )
                + "\n)"
            )
            + "\n)",
            "Whole rows the page slab's free bytes could hold (free pages x page record bytes / "
            "row record bytes): beside row pressure, what a row/page partition at the same "
            "budget could move. Read, not acted on: the allocator plan wants the partition chosen "
            "from measured demand, not from this.",
        ),
        Record(
            requests_name(c),
            GROUP_REQUESTS,
            q.rate(REQUESTS_SOURCE),
            f"Finished requests per second: the rate of `{REQUESTS_SOURCE}` (each finished "
            "request is observed once in the engine's end-to-end latency histogram), summed "
            "over generations. The denominator of the per-request rules.",
        ),
    ]
    for metric in PER_REQUEST:
        records.append(
            Record(
                f"helios:{metric}:per_request_rate{rw}",
                GROUP_REQUESTS,
                f"{q.sel(rate_name(c, metric))}\n/ {q.on}\n({q.sel(requests_name(c))} > 0)",
                f"`helios_{metric}_total` per finished request over {rw} (absent while no "
                "request finishes).",
            )
        )
    records += host_tier(c)
    return sorted(records, key=lambda r: GROUP_ORDER.index(r.group))


def host_tier(c: Config) -> list[Record]:
    """Schema v3's figures per lookup and the prompt tokens' sources (v3 engines only)."""
    q = Q(c)
    rw = str(c.rate_window)
    lookups = f"({q.sel(rate_name(c, 'offload_lookups'))} > 0)"
    tokens = PROMPT_TOKENS.format(rw)
    return [
        Record(
            f"helios:offload_host_store_outcomes:per_lookup_rate{rw}",
            GROUP_STORES,
            f"{q.rate('helios_offload_host_store_outcomes_total')}\n/ {q.on} group_left ()\n{lookups}",
            "Host stores per lookup by `outcome` (stored, dropped_full, dropped_ineligible, "
            "failed): dropped_full and failed are stores the tier lost (HeliosOffloadStoresDropped), "
            "dropped_ineligible prompts too short for any checkpoint.",
        ),
        Record(
            f"helios:offload_host_restore_transfer_bytes:per_transfer_second_rate{rw}",
            GROUP_STORES,
            ratio(q.rate("helios_offload_host_restore_transfer_bytes_total"),
                  q.rate("helios_offload_host_restore_transfer_seconds_sum")),
            "Restore bandwidth, bytes per second of host-to-GPU copy time (bytes rate / the "
            "transfer histogram's seconds_sum rate); absent while nothing is restored.",
        ),
        Record(
            tokens,
            GROUP_TOKENS,
            q.rate("helios_offload_prompt_tokens_total"),
            "Prompt tokens looked up per second by `source` (computed, gpu_prefix, "
            "host_restored), summed over generations.",
        ),
        Record(
            f"helios:offload_prompt_tokens:ratio_rate{rw}",
            GROUP_TOKENS,
            f"{q.sel(tokens)}\n/ ignoring (source) group_left ()\n"
            f"(sum without (source) ({q.sel(tokens)}) > 0)",
            "Share of the prompt tokens looked up by `source`, 0-1: host_restored is the host "
            "tier's payoff, computed what prefill paid.",
        ),
        Record(
            f"helios:offload_lookup_blocked_tokens:per_lookup_rate{rw}",
            GROUP_BLOCKED,
            f"{q.rate('helios_offload_lookup_blocked_tokens_total')}\n/ {q.on} group_left ()\n"
            f"{lookups}",
            "Prompt tokens a miss left to compute, per lookup, by miss `reason`: which reason "
            "costs prefill, not only how often it happens.",
        ),
    ]


def restore(c: Config) -> list[Record]:
    """Countdowns for dashboards and runbooks. They read the window memory recorded at the head
    of the restore alert group (alerts/helios-alerts.yaml), one evaluation behind at most: load
    both files."""
    q = Q(c)
    group = "helios-restore.rules"
    window_open = q.window_open_last()
    return [
        Record(
            "helios:restore_deadline_time_left:seconds",
            group,
            join(
                f"{q.last('helios_restore_deadline_timestamp_seconds')} - time()",
                window_open,
                op=f"and {q.on}",
            ),
            "Seconds left before each deadline (`bound`: request_cutoff, restore) of the open "
            "window; negative once passed. From last seen values.",
        ),
        Record(
            "helios:restore_window_elapsed:seconds",
            group,
            join(
                f"time() - {q.last('helios_restore_window_start_timestamp_seconds')}",
                window_open,
                op=f"and {q.on}",
            ),
            "Seconds since the open window started. From last seen values.",
        ),
    ]


def gpu(c: Config) -> list[Record]:
    q = Q(c)
    rw = str(c.rate_window)
    group = "helios-gpu.rules"
    return [
        Record(
            "helios:gpu_power_limit:ratio",
            group,
            ratio(q.sel("helios_gpu_power_watts"), q.sel("helios_gpu_power_limit_watts")),
            "Power draw / enforced power limit per GPU, 0-1.",
        ),
        Record(
            "helios:gpu_memory_used:ratio",
            group,
            ratio(q.sel("helios_gpu_memory_used_bytes"), q.sel("helios_gpu_memory_total_bytes")),
            "GPU memory used / total per GPU, 0-1.",
        ),
        Record(
            f"helios:gpu_energy_joules:rate{rw}",
            group,
            f"rate({q.sel('helios_gpu_energy_joules_total')}[{rw}])",
            "Average power from the energy counter, watts per GPU.",
        ),
    ]


def exporter(c: Config) -> list[Record]:
    q = Q(c)
    group = "helios-exporter.rules"
    return [
        Record(
            "helios:exporter_source_staleness:seconds",
            group,
            f"time() - {q.sel('helios_exporter_source_last_success_timestamp_seconds')}",
            "Seconds since each source last succeeded.",
        ),
    ]


def records(c: Config) -> list[Record]:
    return offload(c) + restore(c) + gpu(c) + exporter(c)
