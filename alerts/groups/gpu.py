"""GPUs as NVML sees them: lost devices and power capping."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, indent, num, ratio
from alerts.rules import Alert, Promise
from alerts.templates import T

GROUP = "helios-gpu"


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    gpu = "GPU {{ $labels.gpu }}"
    return [
        Alert(
            name="HeliosGpuLost",
            group=GROUP,
            severity="critical",
            for_="1m",
            promised=Promise("a GPU stopped answering NVML"),
            expr=f"{q.sel('helios_gpu_up')} == 0",
            summary=f"{gpu} stopped answering NVML on {t.target}",
            description=(
                f"{gpu} ({{{{ $labels.uuid }}}}) on {t.target} stopped answering NVML. The "
                "engine's tensor-parallel group cannot serve without it."
            ),
            meaning="`helios_gpu_up == 0`",
        ),
        Alert(
            name="HeliosGpuPowerAtLimit",
            group=GROUP,
            severity="warning",
            for_="15m",
            promised=Promise("a GPU runs at its enforced power limit"),
            expr=(
                "(\n"
                + indent(
                    ratio(
                        f"avg_over_time({q.sel('helios_gpu_power_watts')}[{c.power_avg_window}])",
                        q.sel("helios_gpu_power_limit_watts"),
                    )
                )
                + f"\n) >= {num(c.power_limit_ratio)}"
            ),
            summary=f"{gpu} on {t.target} runs at its power limit",
            description=(
                f"{gpu} ({{{{ $labels.uuid }}}}) on {t.target} averaged "
                f"{{{{ $value | humanizePercentage }}}} of its enforced power limit over "
                f"{c.power_avg_window} (threshold {c.power_limit_ratio:.0%}); clocks are being "
                "capped, so latency and throughput comparisons are not valid."
            ),
            meaning=(
                f"`helios_gpu_power_watts` averaged over {c.power_avg_window} is at least "
                f"{c.power_limit_ratio:.0%} of `helios_gpu_power_limit_watts`"
            ),
        ),
    ]
