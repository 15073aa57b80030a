"""Helios host offload tier dashboard: slabs, evictions, lookups and host-tier reuse."""

from __future__ import annotations

from functools import partial

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import units

from dashboards import lib
from dashboards.engines import engine_kind
from dashboards.lib import Layout, Scope, Settings, base_dashboard, datasource_variable, q, steps

UID = "helios-offload"
# An empty panel says why it may be empty: an engine of another kind (serve --engine-kind) may
# not export its inputs (the Engine kind row names them), or nothing has happened yet. Panels
# with a reason of their own keep it.
ABSENT = "no data: not exported by this engine (see Engine kind), or none yet"
stat_panel = partial(lib.stat_panel, no_value=ABSENT)
ts_panel = partial(lib.ts_panel, no_value=ABSENT)
FILE = "helios-offload.json"

# Finished requests: the count of the engine's end-to-end latency histogram (passed through as
# helios_engine_native_*), which SGLang-style engines and the simulator both export.
REQUESTS = "helios_engine_native_e2e_request_latency_seconds_count"
# The per-request figures of the offload experiments: (numerator counter, legend).
PER_REQUEST = (
    ("helios_offload_prompt_tokens_reused_total", "prompt tokens reused / request"),
    ("helios_offload_host_stores_total", "host stores / request"),
    ("helios_offload_host_tokens_restored_total", "host tokens restored / request"),
)



class _Queries:
    """Offload queries: every offload series carries generation, so it is always matched."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.S = scope.sel(generation=True)

    def s(self, *matchers: str) -> str:
        return self.scope.sel(*matchers, generation=True)

    def rate(self, metric: str, by: str, *matchers: str) -> str:
        return (f"sum by ({self.scope.by(by)}) "
                f"(rate({metric}{self.s(*matchers)}[$__rate_interval]))")

    def rate_total(self, metric: str, *matchers: str) -> str:
        return f"sum by ({self.scope.by()}) (rate({metric}{self.s(*matchers)}[$__rate_interval]))"

    def per_request_total(self, metric: str) -> str:
        """Since the generation started: counter / finished requests, per generation."""
        by = self.scope.by("generation")
        return (f"sum by ({by}) ({metric}{self.S})\n/\n"
                f"(sum by ({by}) ({REQUESTS}{self.S}) > 0)")

    def per_request_rate(self, metric: str) -> str:
        """Over the rate interval: counter rate / finished-request rate."""
        return f"{self.rate_total(metric)}\n/\n({self.rate_total(REQUESTS)} > 0)"


def build(settings: Settings) -> db.Dashboard:
    scope = Scope(settings.cluster_label)
    o = _Queries(scope)
    S, _rate, _rate_total = o.S, o.rate, o.rate_total
    headroom = settings.page_headroom_ratio
    pct = f"{headroom:.0%}"
    d = (base_dashboard(
        "Helios offload tier", UID,
        "The engine's host offload tier: row and page slabs carved from one byte budget, "
        "evictions by pressure and outcome, lookups and miss reasons, and whether the host tier "
        "is reused. The evidence for an allocator change is row pressure while pages sit free.",
        ["offload"])
        .with_variable(datasource_variable())
        .with_variable(scope.cluster_variable("helios_offload_slab_capacity"))
        .with_variable(scope.job_variable("helios_offload_slab_capacity"))
        .with_variable(scope.instance_variable("helios_offload_slab_capacity", multi=True))
        .with_variable(scope.variable(
            "generation", "Generation", "helios_monitoring_generation_info", multi=True,
            matchers=['job=~"$job"', 'instance=~"$instance"'],
            description="Engine incarnation; counters restart from 0 with every generation."))
        .annotation(scope.generation_annotation())
        .annotation(scope.restore_window_annotation(settings.window_memory))
        .annotation(scope.phase_annotation()))
    grid = Layout(d)

    grid.row("Now")
    grid.add(stat_panel(
        "Slab free",
        f"Share of each slab's records that is free now (offload.slabs.<kind>.free / capacity). "
        f"A full slab is normal for a cache (it evicts); what matters is a full row slab while "
        f"the page slab keeps {pct} or more free: the budget split wastes memory (see row "
        f"pressure with page headroom).",
        units.PercentUnit,
        q(f"helios_offload_slab_free{S}\n/\n(helios_offload_slab_capacity{S} > 0)",
          "{{kind}} {{instance}}", instant=True),
        thresholds=steps((None, "orange"), (headroom, "green")), color="value"), 8, 5)
    grid.add(stat_panel(
        "Row pressure with page headroom",
        f"Row-pressure eviction attempts seen while the page slab had at least {pct} free, since "
        f"this generation started (helios_offload_row_pressure_with_page_headroom_total). Above "
        f"0 and rising = rows are the bottleneck while pages idle: evidence for giving rows a "
        f"larger share of the budget (HeliosOffloadRowPressureWithPageHeadroom).",
        units.Short,
        q(f"sum by ({scope.by('generation')}) "
          f"(helios_offload_row_pressure_with_page_headroom_total{S})",
          "{{instance}} {{generation}}", instant=True),
        thresholds=steps((None, "green"), (1, "orange"))), 6, 5)
    grid.add(stat_panel(
        "Lookup hit ratio",
        "Share of prefix lookups that found a usable checkpoint in the host tier, over the rate "
        "interval. Low with many no_prefix misses (nothing was ever stored for those prefixes "
        "under this key) or key_mismatch misses (stored under another checkpoint key) is a "
        "property of the traffic; low with many 'evicted' misses (stored, then retired for "
        "capacity) means the tier is too small for the working set.",
        units.PercentUnit,
        q(f"{_rate_total('helios_offload_lookup_hits_total')}\n/\n"
          f"({_rate_total('helios_offload_lookups_total')} > 0)", "{{instance}}", instant=True),
        thresholds=steps((None, "orange"), (0.2, "green")), color="value",
        no_value="no lookups"), 5, 5)
    grid.add(stat_panel(
        "Budget in use",
        "Resident bytes of the host tier as a share of its byte budget (offload.resident.bytes "
        "/ budget_bytes).",
        units.PercentUnit,
        q(f"helios_offload_resident_bytes{S}\n/\n(helios_offload_budget_bytes{S} > 0)",
          "{{instance}}", instant=True),
        color="value"), 5, 5)

    grid.row("Slabs")
    grid.add(ts_panel(
        "Slab occupancy",
        f"Used share of the row and page slabs over time. Rows at 100% with pages below "
        f"{1 - headroom:.0%} (the threshold line) is the imbalance the row-pressure evidence "
        f"counts.",
        units.PercentUnit,
        q(f"1 - helios_offload_slab_free{S}\n/\n(helios_offload_slab_capacity{S} > 0)",
          "{{kind}} {{instance}} {{generation}}"),
        thresholds=steps((None, "green"), (1 - headroom, "orange")), min_val=0, max_val=1), 12, 8)
    grid.add(ts_panel(
        "Slab records used and capacity",
        "Records in use and the capacity of each slab (a row record holds one recurrent-state "
        "checkpoint, a page record one KV page). Capacity changes only with the budget or the "
        "row fraction of a new generation.",
        units.Short,
        q(f"helios_offload_slab_capacity{S} - helios_offload_slab_free{S}",
          "{{kind}} used {{instance}}", ref="A"),
        q(f"helios_offload_slab_capacity{S}", "{{kind}} capacity {{instance}}", ref="B"),
        min_val=0), 12, 8)

    grid.row("Evictions")
    grid.add(ts_panel(
        "Eviction attempts by pressure",
        "Eviction attempts per second: row = a recurrent-state row was needed and none was "
        "free, page = KV pages were needed. Steady row attempts with page attempts at 0 is the "
        "row-bound pattern.",
        units.OpsPerSecond,
        q(_rate("helios_offload_eviction_attempts_total", "pressure"), "{{pressure}} {{instance}}"),
        min_val=0), 8, 8)
    grid.add(ts_panel(
        "Eviction outcomes",
        "How attempts ended, per second: evicted (something was freed), pinned (candidates were "
        "in use by readers), non_durable (candidates still awaited their stores), no_eligible "
        "(nothing to evict). Anything but evicted means a request could not get its records: "
        "sustained pinned/no_eligible = the tier is undersized for concurrent requests.",
        units.OpsPerSecond,
        q(_rate("helios_offload_eviction_outcomes_total", "pressure, outcome"),
          "{{pressure}} {{outcome}} {{instance}}"),
        stacked=True), 8, 8)
    grid.add(ts_panel(
        "Row pressure while pages had headroom",
        f"Row-pressure attempts per second made while at least {pct} of pages were free, against "
        f"all row-pressure attempts. When the two lines coincide every row eviction happened "
        f"with idle pages: the counter evidence an allocator arm needs before it is compared "
        f"(the allocator plan); it does not say which row fraction to try (helios-exporter geometry "
        f"--partitions shows the options beside the measured demand).",
        units.OpsPerSecond,
        q(_rate_total("helios_offload_row_pressure_with_page_headroom_total"),
          f"with >= {pct} pages free {{{{instance}}}}", ref="A"),
        q(_rate_total("helios_offload_eviction_attempts_total", 'pressure="row"'),
          "all row attempts {{instance}}", ref="B"),
        min_val=0), 8, 8)
    page, row = o.s('kind="page"'), o.s('kind="row"')
    grid.add(ts_panel(
        "Rows the free page bytes could hold",
        "The page slab's free bytes in whole rows (free pages x page record bytes / row record "
        "bytes; the recording rule helios:offload_rows_in_free_page_bytes:floor, here per "
        "generation), against the row slab's capacity. Read beside row pressure: rows evicted "
        "while this stays high is budget idle in pages. What a partition at the same budget "
        "would give is `helios-exporter geometry --partitions`, and it is chosen from measured "
        "demand, not from this line.",
        units.Short,
        q(f"floor(\n  (helios_offload_slab_free{page}\n"
          f"   * helios_offload_slab_record_bytes{page})\n"
          f"  / ignoring (kind)\n  helios_offload_slab_record_bytes{row}\n)",
          "rows in free pages {{instance}} {{generation}}", ref="A"),
        q(f"helios_offload_slab_capacity{row}",
          "row capacity {{instance}} {{generation}}", ref="B"),
        min_val=0), 8, 7)
    grid.add(ts_panel(
        "Retired leaves",
        "Leaves of the prefix index retired per second by eviction, by the record kind freed. "
        "High churn with a low hit ratio means the working set does not fit.",
        units.OpsPerSecond,
        q(_rate("helios_offload_retired_leaves_total", "kind"), "{{kind}} {{instance}}"),
        min_val=0), 8, 7)
    grid.add(ts_panel(
        "Ancestor row compactions",
        "Rows freed per second from single-child ancestors (their pages and child stay) when no "
        "leaf could be retired under row pressure. Frequent compactions turn later lookups into "
        "'evicted' misses.",
        units.OpsPerSecond,
        q(_rate_total("helios_offload_ancestor_compactions_total"), "{{instance}}"),
        min_val=0), 8, 7)

    grid.row("Lookups and host tier")
    grid.add(ts_panel(
        "Lookups and hits",
        "Prefix lookups and hits per second. Hits falling while lookups hold steady means stored "
        "prefixes are evicted before reuse: see the misses by reason and the evictions.",
        units.OpsPerSecond,
        q(_rate_total("helios_offload_lookups_total"), "lookups {{instance}}", ref="A"),
        q(_rate_total("helios_offload_lookup_hits_total"), "hits {{instance}}", ref="B"),
        min_val=0), 8, 8)
    grid.add(ts_panel(
        "Misses by reason",
        "Lookup misses per second by reason: no_prefix (nothing was stored for that prefix under "
        "this key: first sight, or an order the tier never saw), evicted (it was stored and "
        "later retired for capacity), key_mismatch (stored under another checkpoint key), "
        "no_checkpoint, not_durable (store not finished), too_short, other. These separate the "
        "three explanations of missing reuse: growing 'evicted' = capacity (the tier is too "
        "small for the working set); key_mismatch = incompatible keys (clients mix models or "
        "checkpoints); no_prefix = order or first sight, not capacity.",
        units.OpsPerSecond,
        q(_rate("helios_offload_lookup_misses_total", "reason"), "{{reason}} {{instance}}"),
        stacked=True), 8, 8)
    grid.add(ts_panel(
        "Host stores vs tokens restored",
        "Checkpoints stored to the host tier per second (left axis) against prompt tokens "
        "restored from it and reused overall (right axis, tokens/s). Stores with no tokens "
        "restored for a long time = the tier costs memory and bandwidth for nothing "
        "(HeliosOffloadHostTierNoReuse).",
        units.OpsPerSecond,
        q(_rate_total("helios_offload_host_stores_total"), "stores {{instance}}", ref="A"),
        q(_rate_total("helios_offload_host_tokens_restored_total"),
          "tokens restored {{instance}}", ref="B"),
        q(_rate_total("helios_offload_prompt_tokens_reused_total"),
          "tokens reused {{instance}}", ref="C"),
        min_val=0, right_axis=("tokens .*", "suffix: tok/s")), 8, 8)
    grid.add(ts_panel(
        "Resident bytes and budget",
        "Bytes resident in the host tier against its byte budget. Resident bytes far below the "
        "budget while rows are full is the wasted-budget pattern of a row-bound split.",
        units.BytesIEC,
        q(f"helios_offload_resident_bytes{S}", "resident {{instance}}", ref="A"),
        q(f"helios_offload_budget_bytes{S}", "budget {{instance}}", ref="B"),
        min_val=0), 12, 7)
    grid.add(ts_panel(
        "Resident records",
        "Records (rows and pages) resident in the host tier. Restarts from 0 with every new "
        "generation; a drop without a new generation means mass eviction.",
        units.Short,
        q(f"helios_offload_resident_records{S}", "{{instance}} {{generation}}"),
        min_val=0), 12, 7)

    grid.row("Per request")
    refs = "ABC"
    grid.add(stat_panel(
        "Per request, this generation",
        "Prompt tokens reused, host stores and host tokens restored per finished request since "
        "the generation started (counter / helios_engine_native_e2e_request_latency_seconds_count): "
        "the figures an experiment's control block quotes, e.g. 9 prompt tokens reused, 3 host "
        "stores and 0 host tokens restored per request. Stores per request with no tokens "
        "restored = the host tier is written but never read back; several stores per request do "
        "not make several useful endpoints.",
        units.Short,
        *(q(o.per_request_total(metric), f"{legend} {{{{instance}}}} {{{{generation}}}}",
            instant=True, ref=ref) for ref, (metric, legend) in zip(refs, PER_REQUEST, strict=True)),
        text_mode="value_and_name", color="none", no_value="no finished requests"), 12, 6)
    grid.add(ts_panel(
        "Per request over time",
        "The same three ratios over the rate interval (counter rate / finished-request rate): "
        "how reuse per request changes during a run, e.g. a forward replay against a reverse "
        "one. Empty while no request finishes.",
        units.Short,
        *(q(o.per_request_rate(metric), f"{legend} {{{{instance}}}}", ref=ref)
          for ref, (metric, legend) in zip(refs, PER_REQUEST, strict=True)),
        min_val=0, no_value="no finished requests"), 12, 6)
    host_tier(grid, o)
    engine_kind(grid, scope)
    return d


# The v3 panels' text where a v1 engine (which exports none of their series) is selected.
NO_V3 = "no data (a schema v1 engine exports none)"
REUSED = 'source!="computed"'


def host_tier(grid: Layout, o: _Queries) -> None:
    """Schema v3's host-tier panels: stores, evictions' age, blocked and prompt tokens, restores."""
    scope, S = o.scope, o.S
    rate, rate_total = o.rate, o.rate_total

    def quantile(metric: str, p: float, *by: str) -> str:
        return (f"histogram_quantile({p}, sum by ({scope.by(*by, 'le')}) "
                f"(rate({metric}_bucket{S}[$__rate_interval])))")

    grid.row("Host tier (schema v3)")
    grid.add(ts_panel(
        "Host stores by outcome",
        "Checkpoint stores per second by how they ended: stored, dropped_full (no record could "
        "be freed: every eviction attempt for it ended pinned, non_durable or no_eligible), "
        "failed (the host copy failed), dropped_ineligible (a prompt shorter than any checkpoint, "
        "expected with short prompts). Sustained dropped_full or failed is "
        "HeliosOffloadStoresDropped: read the eviction outcomes beside it for why nothing was "
        "freed; dropped_ineligible alone needs nothing.",
        units.OpsPerSecond,
        q(rate("helios_offload_host_store_outcomes_total", "outcome"), "{{outcome}} {{instance}}"),
        stacked=True, no_value=NO_V3), 8, 8)
    grid.add(ts_panel(
        "Age and idle time at eviction",
        "Median age of the checkpoints evicted under each pressure (since their store) and median "
        "time since their last hit (only those ever hit), over the rate interval. Evicted young "
        "= the tier churns faster than the traffic comes back: more budget for that slab helps; "
        "evicted old and long idle = eviction takes what nobody asks for, as it should.",
        units.Seconds,
        q(quantile("helios_offload_eviction_age_seconds", 0.5, "pressure"),
          "{{pressure}} age p50 {{instance}}", ref="A"),
        q(quantile("helios_offload_eviction_idle_seconds", 0.5, "pressure"),
          "{{pressure}} idle p50 {{instance}}", ref="B"),
        min_val=0, no_value=NO_V3), 8, 8)
    grid.add(ts_panel(
        "Evicted without a hit",
        "Share of the checkpoints evicted under each pressure that never served a hit (age count "
        "minus idle count, over age count). Near 1 = stores are written and evicted unread: the "
        "tier stores what the traffic never repeats (or evicts it before it comes back: see the "
        "age at eviction).",
        units.PercentUnit,
        q(f"1 - {rate('helios_offload_eviction_idle_seconds_count', 'pressure')}\n/\n"
          f"({rate('helios_offload_eviction_age_seconds_count', 'pressure')} > 0)",
          "{{pressure}} {{instance}}"),
        min_val=0, max_val=1, no_value=NO_V3), 8, 8)
    grid.add(ts_panel(
        "Blocked tokens by reason",
        "Prompt tokens per second that a missed lookup left to compute (less those found on the "
        "GPU), by miss reason: which reason costs prefill, not only how often it happens. "
        "Mostly evicted = capacity; no_prefix = the traffic's order or first sight; too_short "
        "or no_checkpoint with no hits = an inert cache (HeliosOffloadCacheInert).",
        units.Short,
        q(rate("helios_offload_lookup_blocked_tokens_total", "reason"), "{{reason}} {{instance}}"),
        stacked=True, no_value=NO_V3), 8, 8)
    grid.add(ts_panel(
        "Prompt tokens by source",
        "Where the prompt tokens of every looked-up request came from, per second: computed "
        "(prefill), gpu_prefix (the GPU's own prefix cache), host_restored (copied from the host "
        "tier). The host_restored band is the host tier's payoff; the share panel beside it is "
        "the same as a fraction of all prompt tokens.",
        units.Short,
        q(rate("helios_offload_prompt_tokens_total", "source"), "{{source}} {{instance}}"),
        stacked=True, no_value=NO_V3), 8, 8)
    grid.add(ts_panel(
        "Host tier payoff",
        "Share of all prompt tokens looked up that were restored from the host tier "
        "(host_restored / all sources), and the GPU prefix cache's share for comparison. A host "
        "share near 0 while the tier stores (see the stores by outcome) = memory and store "
        "bandwidth without payoff (HeliosOffloadHostTierNoReuse).",
        units.PercentUnit,
        q(f"{rate('helios_offload_prompt_tokens_total', 'source', REUSED)}"
          f"\n/ on ({scope.by()}) group_left ()\n"
          f"({rate_total('helios_offload_prompt_tokens_total')} > 0)",
          "{{source}} {{instance}}"),
        min_val=0, max_val=1, no_value=NO_V3), 8, 8)
    grid.add(ts_panel(
        "Restore bandwidth",
        "Bytes copied from the host tier to the GPU per second of copy time (restored bytes / "
        "transfer seconds, over the rate interval), and the 90th percentile of one transfer's "
        "time (right axis). Bandwidth far below the host link's = copies contend or are small; "
        "a long p90 transfer adds directly to the time to first token of a hit.",
        units.BytesPerSecondIEC,
        q(f"{rate_total('helios_offload_host_restore_transfer_bytes_total')}\n/\n"
          f"({rate_total('helios_offload_host_restore_transfer_seconds_sum')} > 0)",
          "bandwidth {{instance}}", ref="A"),
        q(quantile("helios_offload_host_restore_transfer_seconds", 0.9),
          "transfer p90 {{instance}}", ref="B"),
        min_val=0, no_value=NO_V3, right_axis=("transfer p90.*", "s")), 16, 8)
