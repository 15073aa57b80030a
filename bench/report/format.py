"""What every section of docs/benchmarks.md shares (bench/report/report.py renders the page): the
goals, the number formats, and the lines for a section that was not measured and for the command
that measured it."""

from __future__ import annotations

from typing import Any

GOALS = {
    "throughput": 10.0,  # sidecar req/s >= 10 x node-exporter's, per client count
    "keepalive_p50_ms": 5.0,  # median /metrics answer on one keep-alive connection (Prometheus)
    "ingest_ratio": 5.0,  # full parse / pass-through parse
    "cycle_cpu_ms": 5.0,
    "steady_cpu_share": 0.02,
    "steady_rss_mib": 80.0,
    "soak_rss_growth_mib": 10.0,
    # A gzip scrape's CPU over an identity scrape's, at most this share of compressing the body
    # once: the compression is paid once per poll cycle, not per scrape.
    "gzip_excess_share": 0.5,
}
NVML_DOC_RANGE_MS = (0.2, 0.4)  # docs/gpu.md: "roughly 0.2-0.4 ms per GPU" against the fake


def yes(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "n/a"}[ok]


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms" if value >= 0.1 else f"{value * 1000:.0f} µs"


def pct(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value * 100:.{digits}f}%"


def client_count(n: int) -> str:
    return "1 client" if n == 1 else f"{n} clients"


def not_measured(name: str, record: dict[str, Any] | None) -> list[str]:
    if record is None:
        return ["Not measured: the section was not run by this invocation (`--only`, or the run "
                "was interrupted before it).", ""]
    lines = [f"**Not measured**: {record.get('status')}: {record.get('reason', '?')}.", ""]
    tail = record.get("log_tail")
    if tail:
        lines += ["Last lines of its output:", "", "```", tail.strip()[-1200:], "```", ""]
    return lines


def command_line(record: dict[str, Any] | None) -> list[str]:
    if record is None:
        return []
    bits = [f"Command: `{record['command']}`"]
    if "wall_s" in record:
        bits.append(f"{record['wall_s']:.0f} s")
    if record.get("machine_busy_share") is not None:
        bits.append(f"whole machine {pct(record['machine_busy_share'])} busy meanwhile")
    return ["; ".join(bits) + ".", ""]
