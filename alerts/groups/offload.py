"""Offload evidence for the engine team (info): allocator pressure and an unused host tier."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, indent, join, num, ratio
from alerts.rules import Alert
from alerts.templates import T

GROUP = "helios-offload"
NAMES = (
    "HeliosOffloadRowPressureWithPageHeadroom",
    "HeliosOffloadHostTierNoReuse",
    "HeliosOffloadGeometryInconsistent",
)


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
            group=GROUP,
            severity="info",
            expr=join(
                f"{q.increase('helios_offload_lookups_total', c.host_tier_window)} > 0",
                f"{q.increase('helios_offload_host_stores_total', c.host_tier_window)} > 0",
                f"{q.increase('helios_offload_host_tokens_restored_total', c.host_tier_window)}"
                " == 0",
                op=f"and {q.on}",
            ),
            summary=f"Host offload tier stores but never restores on {t.target}",
            description=(
                "{{ $value | humanize }} lookups and "
                + t.value(
                    "sum without (generation) (increase(helios_offload_host_stores_total"
                    f"{{{{TARGET}}}}[{c.host_tier_window}]))",
                    "humanize",
                )
                + f" host stores in the last {c.host_tier_window} on {t.target}, but no token "
                "was restored from the host tier: it costs host memory and store bandwidth "
                "without reuse."
            ),
            meaning=(
                f"over {c.host_tier_window}: lookups and host stores increased, "
                "`helios_offload_host_tokens_restored_total` did not"
            ),
        ),
        Alert(
            name="HeliosOffloadGeometryInconsistent",
            group=GROUP,
            severity="warning",
            expr=f"{q.sel('helios_offload_geometry_consistent')} == 0",
            summary=f"Offload snapshot byte arithmetic does not hold on {t.target}",
            description=(
                f"As of {t.now()}, the offload snapshot of generation "
                f"{{{{ $labels.generation }}}} on {t.target} failed a geometry rule: row and "
                "page capacity times record bytes within the budget, resident bytes within the "
                "budget, lookup hits plus misses not above lookups (/status names the rule). "
                "Offload figures of this generation are not evidence until it holds again."
            ),
            meaning="`helios_offload_geometry_consistent == 0` (per `generation`)",
        ),
    ]
