"""Offload evidence for the engine team (info): allocator pressure and an unused host tier."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import STEP, Q, indent, join, num, ratio, short
from alerts.rules import Alert, Promise, Record
from alerts.templates import T

GROUP = "helios-offload"


# HeliosOffloadHostTierNoReuse's counters, grown over the host-tier window: read as the sum of
# their 5-minute increases, kept once every 5 minutes per target (a step, alerts/promql.py), so an
# hour reads 12 steps per target instead of 240 samples per series. Recorded in a group of their
# own, which Prometheus evaluates beside the alerts.
STEPS_GROUP = "helios-offload-steps"
# The alert itself is a group of its own too: in a fleet whose host tier is misconfigured
# everywhere it fires for every engine, and Prometheus expands the annotations of every firing
# alert at every evaluation (about 0.2 ms each on the machine of docs/scale.md).
HOST_TIER_GROUP = "helios-offload-host-tier"
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
