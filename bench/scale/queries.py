"""Every query a Grafana dashboard of dashboards/*.json sends to Prometheus, as Grafana sends it.

Used by bench/scale/scale.py. For one dashboard and a time range this yields the panel queries (range or
instant), the annotation queries and the template variable queries, with the variables
substituted the way Grafana (10/11, Prometheus data source) does:

- a multi-value variable left at "All" becomes its `allValue` (`.*` in our dashboards); a
  single-value variable its `current` value, or the first of its sorted values when it has none
  (what Grafana selects on load);
- `$__interval`: the range divided by the panel's max data points (its width in pixels on a
  1920 px wide browser unless the panel sets maxDataPoints), rounded as Grafana rounds intervals,
  and at least the data source's scrape interval (`timeInterval`, 15 s) or the panel's min
  interval; `$__rate_interval` = max($__interval + scrape interval, 4 x scrape interval);
  `$__range`, `$__range_s` the whole range;
- a range query's step is that interval (at least range / 11000), with start and end aligned
  down to a multiple of the step; an instant query runs at the end of the range;
- annotation queries are range queries with Grafana's default step of 60 s;
- `label_values(selector, label)` variables go to /api/v1/label/<label>/values with the selector
  as `match[]` over the range.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter import durations

VIEWPORT_PX = 1920  # browser width the panel widths are computed for
GRID_COLUMNS = 24
SCRAPE_INTERVAL_S = 15  # the data source's timeInterval ("scrape interval")
ANNOTATION_STEP_S = 60  # Grafana's default step for Prometheus annotation queries
MAX_POINTS_PER_SERIES = 11000  # Prometheus refuses more; Grafana raises the step to stay below

# Grafana's interval rounding (rangeutil.roundInterval): (upper bound ms, rounded ms).
_ROUND = (
    (15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1500, 1000),
    (3500, 2000), (7500, 5000), (12500, 10000), (17500, 15000), (25000, 20000), (45000, 30000),
    (90000, 60000), (210000, 120000), (450000, 300000), (750000, 600000), (1050000, 900000),
    (1500000, 1200000), (2700000, 1800000), (5400000, 3600000), (9000000, 7200000),
    (16200000, 10800000), (32400000, 21600000), (86400000, 43200000), (604800000, 86400000),
)


def round_interval(ms: float) -> int:
    """Grafana's rounding of an interval in milliseconds."""
    for bound, rounded in _ROUND:
        if ms < bound:
            return rounded
    return 604800000


def grafana_duration(seconds: float) -> str:
    """An interval as Grafana writes it into $__interval: 20s, 1m, 2h (whole units)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if seconds >= 1:
        return f"{int(seconds)}s"
    return f"{int(seconds * 1000)}ms"


@dataclass(frozen=True)
class Query:
    """One request Grafana makes for a dashboard."""

    dashboard: str  # file name
    panel: str  # panel title, "annotation: <name>" or "variable: <name>"
    ref: str  # refId, or the variable's name
    kind: str  # "range", "instant", "annotation" or "label_values"
    expr: str  # the PromQL sent (for label_values: the match[] selector)
    start: float
    end: float
    step: float | None  # range queries
    label: str | None = None  # label_values

    def params(self) -> dict[str, str]:
        """The query string of the HTTP request."""
        if self.kind == "instant":
            return {"query": self.expr, "time": _fmt(self.end)}
        if self.kind == "label_values":
            params = {"start": _fmt(self.start), "end": _fmt(self.end)}
            if self.expr:
                params["match[]"] = self.expr
            return params
        return {"query": self.expr, "start": _fmt(self.start), "end": _fmt(self.end),
                "step": _fmt(self.step or 0)}

    @property
    def path(self) -> str:
        if self.kind == "instant":
            return "/api/v1/query"
        if self.kind == "label_values":
            return f"/api/v1/label/{self.label}/values"
        return "/api/v1/query_range"


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


def panel_width_px(w: int) -> int:
    return int(VIEWPORT_PX * w / GRID_COLUMNS)


def interval_s(range_s: float, max_points: int, min_interval_s: float = SCRAPE_INTERVAL_S) -> float:
    """$__interval of a panel, in seconds."""
    rounded = round_interval(range_s * 1000 / max(1, max_points)) / 1000
    return max(rounded, min_interval_s)


def rate_interval_s(interval: float, scrape: float = SCRAPE_INTERVAL_S) -> float:
    return max(interval + scrape, 4 * scrape)


def substitute(expr: str, variables: dict[str, str], interval: float, range_s: float) -> str:
    """Grafana's template substitution of `expr`."""
    builtins = {
        "__rate_interval": grafana_duration(rate_interval_s(interval)),
        "__interval_ms": str(int(interval * 1000)),
        "__interval": grafana_duration(interval),
        "__range_s": str(int(range_s)),
        "__range_ms": str(int(range_s * 1000)),
        "__range": grafana_duration(range_s),
    }
    values = {**variables, **builtins}

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", one, expr)


def _range(start: float, end: float, step: float) -> tuple[float, float]:
    return math.floor(start / step) * step, math.floor(end / step) * step


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows


def variable_values(dashboard: dict[str, Any],
                    label_values: Callable[[str, str], list[str]]) -> dict[str, str]:
    """The value Grafana gives each template variable on load; `label_values(selector, label)`
    asks Prometheus when a single-value variable has no current value."""
    out: dict[str, str] = {}
    for var in dashboard.get("templating", {}).get("list", []):
        name = var["name"]
        if var.get("type") == "datasource":
            out[name] = "prometheus"
            continue
        current = var.get("current") or {}
        value = current.get("value")
        if value in ("$__all", ["$__all"]):
            out[name] = var.get("allValue") or ".*"
        elif value not in (None, "", []):
            out[name] = value if isinstance(value, str) else "|".join(value)
        else:
            selector, label = _label_values_args(substitute(var["query"] if isinstance(
                var["query"], str) else var["query"].get("query", ""), out, SCRAPE_INTERVAL_S, 0))
            found = sorted(label_values(selector, label))
            out[name] = found[0] if found else ""
    return out


def _label_values_args(query: str) -> tuple[str, str]:
    m = re.fullmatch(r"\s*label_values\((?:(.*),\s*)?(\w+)\s*\)\s*", query, re.S)
    if m is None:
        raise ValueError(f"not a label_values() query: {query!r}")
    return (m.group(1) or "").strip(), m.group(2)


def queries(path: Path, start: float, end: float, variables: dict[str, str]) -> list[Query]:
    """Every query of the dashboard at `path` over [start, end] with these variable values."""
    dashboard = json.loads(path.read_text())
    range_s = end - start
    out: list[Query] = []
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        text = var["query"] if isinstance(var["query"], str) else var["query"].get("query", "")
        selector, label = _label_values_args(substitute(text, variables, SCRAPE_INTERVAL_S, range_s))
        out.append(Query(path.name, f"variable: {var['name']}", var["name"], "label_values",
                         selector, start, end, None, label))
    for ann in dashboard.get("annotations", {}).get("list", []):
        if not ann.get("expr") or not ann.get("enable", True):
            continue
        step = float((ann.get("step") and durations.seconds(ann["step"])) or ANNOTATION_STEP_S)
        expr = substitute(ann["expr"], variables, step, range_s)
        s, e = _range(start, end, step)
        out.append(Query(path.name, f"annotation: {ann['name']}", ann["name"], "annotation",
                         expr, s, e, step))
    for panel in _panels(dashboard):
        targets = panel.get("targets") or []
        if not targets:
            continue
        max_points = panel.get("maxDataPoints") or panel_width_px(panel["gridPos"]["w"])
        min_interval = durations.seconds(panel["interval"]) if panel.get("interval") else \
            SCRAPE_INTERVAL_S
        interval = interval_s(range_s, max_points, min_interval)
        step = max(interval, range_s / MAX_POINTS_PER_SERIES)
        for target in targets:
            if target.get("hide"):
                continue
            expr = substitute(target["expr"], variables, interval, range_s)
            if target.get("instant") and not target.get("range"):
                out.append(Query(path.name, panel.get("title", ""), target.get("refId", "A"),
                                 "instant", expr, start, end, None))
            else:
                s, e = _range(start, end, step)
                out.append(Query(path.name, panel.get("title", ""), target.get("refId", "A"),
                                 "range", expr, s, e, step))
    return out
