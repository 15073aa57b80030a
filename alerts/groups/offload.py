"""Offload evidence for the engine team: allocator pressure, an unused or inert host tier (info),
dropped host stores and an inconsistent geometry (tickets)."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import STEP, Q, chain, indent, join, num, ratio, short
from alerts.rules import FOR, Alert, Promise, Record
from alerts.templates import T

GROUP = "helios-offload"


# HeliosOffloadHostTierNoReuse's counters, grown over the host-tier window: read as the sum of
# their 5-minute increases, kept once every 5 minutes per target (a step, alerts/promql.py), so an
# hour reads 12 steps per target instead of 240 samples per series. Recorded in a group of their
# own, which Prometheus evaluates beside the alerts. A step rule reads its own last step, so the
# group stays whole: a ruler that shards by group (Mimir) keeps it on one replica (docs/scale.md).
STEPS_GROUP = "helios-offload-steps"
# The alert itself is a group of its own too: in a fleet whose host tier is misconfigured
# everywhere it fires for every engine, and Prometheus expands the annotations of every firing
# alert at every evaluation (about 0.2 ms each on the machine of docs/scale.md).
HOST_TIER_GROUP = "helios-offload-host-tier"
# Schema v3's alerts read series only a v3 engine exports (a v1 engine: silent), raw, over a
# short window held by `for:`, and each is a group of its own. At 1,000 engines and a 15 s scrape
# one evaluation reads about 100,000 samples (five store-outcome series of 20 samples per engine)
# and 160,000 (eight miss and hit series), as much as a dashboard recording group does
# (docs/scale.md: under 130 ms); a longer window or one group for both would read that much more.
STORES_GROUP = "helios-offload-stores"
INERT_GROUP = "helios-offload-inert"
STORE_OUTCOMES = "helios_offload_host_store_outcomes_total"
# The outcomes HeliosOffloadStoresDropped counts: a store the tier should have taken and lost.
# dropped_ineligible is not one of them: a prompt shorter than any checkpoint can never be
# stored, and short prompts make it by design.
LOST_OUTCOMES = 'outcome=~"dropped_full|failed"'
# The miss reasons that say a lookup could never have hit: the prompt is shorter than any
# checkpoint, or no checkpoint exists for it (HeliosOffloadCacheInert).
INERT_REASONS = 'reason=~"too_short|no_checkpoint"'
OTHER_REASONS = 'reason!~"too_short|no_checkpoint"'
CAN_BE_STORED = 'outcome!="dropped_ineligible"'
HOST_TIER_COUNTERS = (
    "helios_offload_lookups_total",
    "helios_offload_host_stores_total",
    "helios_offload_host_tokens_restored_total",
)


def growth_steps_name(metric: str) -> str:
    return f"helios:{short(metric).removesuffix('_total')}:increase{STEP}_every{STEP}"


def records(c: Config) -> list[Record]:
    q = Q(c)
    return [
        Record(
            growth_steps_name(metric),
            STEPS_GROUP,
            q.stepped(growth_steps_name(metric), q.increase(metric, STEP)),
            f"`{metric}` grown in the last {STEP} (summed over generations), kept once every "
            f"{STEP} per target: consecutive steps tile the time, so their sum over "
            f"{c.host_tier_window} is the growth over {c.host_tier_window}. Read by "
            "HeliosOffloadHostTierNoReuse.",
        )
        for metric in HOST_TIER_COUNTERS
    ]


def growth(c: Config, metric: str) -> str:
    """`metric`'s growth over the host-tier window, from its steps (up to one step late)."""
    return f"sum_over_time({Q(c).sel(growth_steps_name(metric))}[{c.host_tier_window}])"


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    page_free = (
        "max without (generation) (\n"
        + indent(
            ratio(
                q.sel("helios_offload_slab_free", kind="page"),
                q.sel("helios_offload_slab_capacity", kind="page"),
            )
        )
        + f"\n) >= {num(c.page_headroom_ratio)}"
    )
    return [
        Alert(
            name="HeliosOffloadRowPressureWithPageHeadroom",
            group=GROUP,
            severity="info",
            for_="15m",
            promised=Promise("row-pressure evictions keep happening while the page slab has headroom"),
            expr=join(
                q.increase(
                    "helios_offload_row_pressure_with_page_headroom_total", c.row_pressure_window
                )
                + f" >= {num(c.row_pressure_min_attempts)}",
                page_free,
                op=f"and {q.on}",
            ),
            summary=f"Row-pressure evictions with page headroom on {t.target}",
            description=(
                f"{{{{ $value | humanize }}}} row-pressure eviction attempts in the last "
                f"{c.row_pressure_window} on {t.target} happened while the page slab had at "
                f"least {c.page_headroom_ratio:.0%} free (page slab now "
                + t.value(
                    'max without (generation) (helios_offload_slab_free{{TARGET},kind="page"}'
                    ' / helios_offload_slab_capacity{{TARGET},kind="page"})',
                    "humanizePercentage",
                )
                + " free). Counter evidence for a row/page allocator change; not an incident."
            ),
            meaning=(
                f"at least {num(c.row_pressure_min_attempts)} row-pressure eviction attempt(s) "
                f"with page headroom in {c.row_pressure_window} and the page slab is at least "
                f"{c.page_headroom_ratio:.0%} free now"
            ),
        ),
        Alert(
            name="HeliosOffloadHostTierNoReuse",
            group=HOST_TIER_GROUP,
            severity="info",
            for_="30m",
            promised=Promise("lookups and host stores go on but no host tokens are restored"),
            expr=join(
                f"{growth(c, 'helios_offload_lookups_total')} > 0",
                f"{growth(c, 'helios_offload_host_stores_total')} > 0",
                f"{growth(c, 'helios_offload_host_tokens_restored_total')} == 0",
                op=f"and {q.on}",
            ),
            summary=f"Host offload tier stores but never restores on {t.target}",
            # No query in the annotations: when the host tier is misconfigured fleet-wide, this
            # fires for every engine, and Prometheus expands the annotations of every firing
            # alert at every evaluation (docs/scale.md).
            description=(
                f"The engine on {t.target} stored into the host offload tier and looked up "
                f"prefixes ({{{{ $value | humanize }}}} lookups) in the last {c.host_tier_window}, "
                "but no token was restored from the host tier: it costs host memory and store "
                "bandwidth without reuse."
            ),
            meaning=(
                f"over {c.host_tier_window} (in {STEP} steps, so up to {STEP} late): lookups "
                "and host stores increased, `helios_offload_host_tokens_restored_total` did not"
            ),
        ),
        stores_dropped(c),
        cache_inert(c),
        Alert(
            name="HeliosOffloadGeometryInconsistent",
            group=GROUP,
            severity="warning",
            # A snapshot is not read atomically by every engine; a lasting inconsistency is the
            # finding.
            for_="5m",
            promised=Promise(
                "the snapshot's byte arithmetic does not hold, or *(v3)* its record sizes are "
                "not those of `--expect-layout`'s layout",
                since=2,
            ),
            expr=f"{q.sel('helios_offload_geometry_consistent')} == 0",
            summary=(f"Offload snapshot geometry does not hold on {t.target} (its byte "
                     "arithmetic, or the record sizes of --expect-layout)"),
            description=(
                f"As of {t.now()}, the offload snapshot of generation "
                f"{{{{ $labels.generation }}}} on {t.target} failed a geometry rule: row and "
                "page capacity times record bytes within the budget, resident bytes within the "
                "budget, lookup hits plus misses not above lookups, or (with --expect-layout) "
                "each slab's record bytes as the pinned model layout derives them (/status "
                "names the rule, and for the layout the record bytes expected and found). "
                "Offload figures of this generation are not evidence until it holds again."
            ),
            meaning="`helios_offload_geometry_consistent == 0` (per `generation`)",
        ),
    ]


def stores_dropped(c: Config) -> Alert:
    q, t, w = Q(c), T(c), c.store_drop_window
    return Alert(
        name="HeliosOffloadStoresDropped",
        group=STORES_GROUP,
        severity="warning",
        # A burst of drops while readers pin every candidate passes; a share that lasts a
        # quarter of an hour is a tier that cannot take its stores.
        for_="15m",
        promised=Promise(
            "host stores keep ending `dropped_full` or `failed` (not `dropped_ineligible`)",
            since=3,
        ),
        # One alert per engine, not per outcome: in a fleet whose tiers all drop, every firing
        # alert's annotations are expanded at every evaluation (0.1-0.2 ms each; docs/scale.md),
        # and the runbook's first step splits the outcomes.
        expr=(
            f"sum without (generation, outcome) (increase("
            f"{q.match(STORE_OUTCOMES, LOST_OUTCOMES)}"
            f"[{w}]))\n/ {q.on} group_left ()\n(\n"
            + indent(
                "sum without (generation, outcome) (increase("
                f"{q.match(STORE_OUTCOMES, CAN_BE_STORED)}[{w}])) > 0"
            )
            + f"\n)\n>= {num(c.store_drop_ratio)}"
        ),
        summary=f"Host offload stores dropped or failed on {t.target}",
        description=(
            f"{{{{ $value | humanizePercentage }}}} of the host stores the engine on {t.target} "
            f"made or tried to make in the last {w} ended dropped_full or failed "
            "(dropped_full: no record could be freed for it; failed: the host copy failed; "
            "helios_offload_host_store_outcomes_total{outcome} splits them), "
            f"for at least {FOR}. Those prefixes will miss later; short prompts "
            "(dropped_ineligible) are not counted."
        ),
        meaning=(
            f"over {w}: the `dropped_full` and `failed` store outcomes together are at least "
            f"{c.store_drop_ratio:.0%} of `stored + dropped_full + failed`; v3 engines only"
        ),
    )


def cache_inert(c: Config) -> Alert:
    q, t, w = Q(c), T(c), c.inert_window
    misses = "helios_offload_lookup_misses_total"

    def grown(selector: str, without: str = "generation, reason") -> str:
        return f"sum without ({without}) (increase({selector}[{w}]))"

    return Alert(
        name="HeliosOffloadCacheInert",
        group=INERT_GROUP,
        severity="info",
        for_="30m",
        promised=Promise(
            "lookups go on, nothing hits, and every miss is `too_short` or `no_checkpoint`",
            since=3,
        ),
        expr=chain(
            f"{grown(q.match(misses, INERT_REASONS))} > 0",
            (f"and {q.on}",
             f"{grown(q.sel('helios_offload_lookup_hits_total'), 'generation')} == 0"),
            # Only a v3 engine says what the shortest reusable prompt is (a v1 engine: silent).
            (f"and {q.on}",
             f"max without (generation) ({q.sel('helios_offload_geometry_min_reusable_tokens')})"),
            (f"unless {q.on}",
             f"{grown(q.match(misses, OTHER_REASONS))} > 0"),
        ),
        summary=f"Host offload cache cannot hit on {t.target}",
        # No query in the annotations: a configuration that makes every engine inert fires for
        # every engine (docs/scale.md).
        description=(
            f"For {FOR}, the engine on {t.target} looked up prefixes and nothing hit: "
            f"{{{{ $value | humanize }}}} misses in the last {w}, every one too_short or "
            "no_checkpoint. The traffic's prompts are shorter than any checkpoint "
            "(helios_offload_geometry_min_reusable_tokens) or no checkpoint is made for them: "
            "the host tier cannot pay off for this traffic as configured."
        ),
        meaning=(
            f"within {w}: misses `too_short` or `no_checkpoint` increased, hits did not, and no "
            "miss of another reason; v3 engines only (`helios_offload_geometry_min_reusable_tokens` "
            "present)"
        ),
    )
