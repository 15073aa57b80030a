"""Helpers for the dashboard tests: walk dashboard JSON, substitute Grafana variables, pull
metric names out of PromQL, and list the metric names the project defines (the metric catalogue
and the recording rules)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from exporter import catalogue

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = ROOT / "dashboards"
DASHBOARD_FILES = ("helios-restore.json", "helios-offload.json", "helios-gpu.json")

# Series Prometheus itself adds to every target; not defined by the sidecar.
PROMETHEUS_SERIES = frozenset({"up"})

GRAFANA_BUILTINS = frozenset({"__rate_interval", "__interval", "__interval_ms", "__range",
                              "__range_s", "__range_ms", "__dashboard", "__from", "__to"})

def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FUNCTIONS = _words("""
abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes clamp
clamp_max clamp_min cos cosh count_over_time days_in_month day_of_month day_of_week day_of_year
deg delta deriv double_exponential_smoothing exp floor histogram_avg histogram_count
histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum
holt_winters hour idelta increase irate label_join label_replace last_over_time ln log10 log2
mad_over_time max_over_time min_over_time minute month pi predict_linear present_over_time
quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_by_label
sort_by_label_desc sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh time
timestamp vector year
""")
AGGREGATORS = _words("sum min max avg group stddev stdvar count count_values bottomk topk "
                     "quantile limitk limit_ratio")
KEYWORDS = _words("by without on ignoring group_left group_right and or unless bool offset "
                  "atan2 inf nan")

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME_MATCHER = re.compile(r'__name__\s*=\s*"([^"]*)"')
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w:$.])[A-Za-z_:][\w:]*")
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*(\w+)\s*\)\s*$", re.S)


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects: identifiers that are not functions, aggregations,
    keywords, label names (inside {} or grouping lists), durations or Grafana variables."""
    names = set(_NAME_MATCHER.findall(expr))
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", "{}", text)
    text = re.sub(r"\[[^\]]*\]", "[]", text)
    text = _LABEL_LIST.sub(r"\1", text)
    for match in _IDENT.finditer(text):
        word = match.group(0)
        if word.lower() in KEYWORDS or word in FUNCTIONS or word in AGGREGATORS:
            continue
        if text[match.end():].lstrip().startswith("("):
            continue  # a function call
        names.add(word)
    return names


def variables_used(expr: str) -> set[str]:
    return {next(g for g in m.groups() if g) for m in _VARIABLE.finditer(expr)}


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace $var, ${var} and [[var]] as Grafana would; KeyError on an unknown variable."""
    def one(match: re.Match[str]) -> str:
        return values[next(g for g in match.groups() if g)]
    return _VARIABLE.sub(one, expr)


def variable_query_expr(query: str) -> str:
    """The series selector inside a label_values(<selector>, <label>) variable query."""
    match = _LABEL_VALUES.match(query)
    if match is None:
        raise ValueError(f"not a label_values() query: {query!r}")
    return match.group(1)


@dataclass(frozen=True)
class Target:
    dashboard: str
    panel: str
    panel_type: str
    ref: str
    expr: str
    instant: bool

    @property
    def name(self) -> str:
        return f"{self.dashboard}: {self.panel} [{self.ref}]"


def load(name: str, directory: Path = DASHBOARD_DIR) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((directory / name).read_text(encoding="utf-8"))
    return data


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows included, with the panels nested in collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def targets(dashboard: Mapping[str, Any]) -> Iterator[Target]:
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield Target(dashboard["uid"], panel["title"], panel["type"], target["refId"],
                         target["expr"], bool(target.get("instant")))


def all_expressions(dashboard: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for panel targets, annotations and variable queries."""
    for target in targets(dashboard):
        yield target.name, target.expr
    for entry in dashboard.get("annotations", {}).get("list", []):
        if "expr" in entry:
            yield f"{dashboard['uid']}: annotation {entry['name']}", entry["expr"]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            yield (f"{dashboard['uid']}: variable {variable['name']}",
                   variable_query_expr(variable["query"]))


# -- the names the project defines ------------------------------------------------------------

def recording_rules(alerts_dir: Path = ROOT / "alerts") -> set[str]:
    names: set[str] = set()
    for path in sorted(alerts_dir.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            continue
        for group in data.get("groups", []) or []:
            for rule in group.get("rules", []) or []:
                if "record" in rule:
                    names.add(rule["record"])
    return names


@dataclass(frozen=True)
class KnownMetrics:
    names: frozenset[str]
    open_families: tuple[str, ...]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name in self.names or any(name.startswith(p) for p in self.open_families))


def known_metrics(root: Path = ROOT) -> KnownMetrics:
    """The metric catalogue's families (an open row, such as the engine pass-through's
    `helios_engine_native_<name>`, by its prefix), the recording rules, and Prometheus' `up`."""
    names = set(PROMETHEUS_SERIES) | {f.name for f in catalogue.FAMILIES if not f.open}
    # A histogram family is queried by its samples' names.
    names |= {f"{f.name}{suffix}" for f in catalogue.FAMILIES
              if f.type == "histogram" and not f.open for suffix in ("_bucket", "_sum", "_count")}
    names |= recording_rules(root / "alerts")
    return KnownMetrics(frozenset(names), tuple(f.prefix for f in catalogue.FAMILIES if f.open))
