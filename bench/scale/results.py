"""The stored results of bench/scale/scale.py that docs/benchmarks.md's scale section
(bench/report/scale.py) and docs/scale.md's figures (bench/report/scale_docs.py) show, and the
formats both use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STORED = ROOT / "bench" / "results" / "scale.json"
# A later measurement of the rule groups alone (`bench/scale/scale.py --dashboards ''`).
RULES = ROOT / "bench" / "results" / "scale-rules.json"
# The shipped rules at 1,000 engines after an hour of live scraping (`--live-minutes`): their
# recent windows in the head block, as in a Prometheus that has run for hours.
RULES_LIVE = ROOT / "bench" / "results" / "scale-rules-live.json"


def stored_record() -> dict[str, Any] | None:
    """The stored result as a section record of bench/suite.py (None when there is none)."""
    if not STORED.exists():
        return None
    data = json.loads(STORED.read_text())
    return {"status": "ok", "data": data, "command": data.get("command", "bench/scale/scale.py"),
            "stored": True}


def rules_result(d: dict[str, Any]) -> dict[str, Any]:
    """The rule-group measurement to show beside `d` (a scale.py result): a stored rules-only
    run newer than `d`; else `d` itself."""
    if RULES.exists():
        rules: dict[str, Any] = json.loads(RULES.read_text())
        if rules["machine"]["date"] > d["machine"]["date"]:
            return rules
    return d


def live_result(rd: dict[str, Any]) -> dict[str, Any] | None:
    """The live run of the rule files of `rd`, measured after it, if one is stored (its
    commit is named beside its figures)."""
    if not RULES_LIVE.exists():
        return None
    live = json.loads(RULES_LIVE.read_text())
    later = live["machine"]["date"] >= rd["machine"]["date"]
    return live if later and live["rule_files"] == rd["rule_files"] else None


def format_ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f} ms"
    return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"


def largest(result: dict[str, Any]) -> dict[str, Any]:
    """The run of `result` with the most engines."""
    return max(result["runs"], key=lambda r: r["engines"])


def by_group(run: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The rule groups of `run` by name (none without a run)."""
    return {g["group"]: g for g in run["rules"]} if run else {}


def format_count(n: float | None) -> str:
    return "-" if n is None else f"{n:,.0f}"


def prom_cpu(load: dict[str, Any]) -> str:
    """Prometheus's share of a core while the rules were measured, and its nice value."""
    share = load.get("prometheus_cpu_share_during_rules")
    if share is None:
        return ""
    return f"; Prometheus {share:.0%} of a core (nice {load.get('prometheus_nice', '?')})"
