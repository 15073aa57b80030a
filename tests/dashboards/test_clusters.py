"""Every dashboard query keeps clusters apart, proven on the parsed PromQL (promql-parser, a port
of the Prometheus parser): every series selector matches the cluster variable on the configured
cluster label, every aggregation keeps that label, and every join matches on it. Two clusters
with the same job and instance then never mix under a global view such as Thanos or Mimir
(tests/dashboards/test_panels_live.py shows it on a real Prometheus)."""

from __future__ import annotations

from typing import Any

import promql_parser
import pytest

from dashboards.lib import Settings
from tests.dashboards.promql import DASHBOARD_FILES, all_expressions, substitute

# The cluster variable's value, recognisable after substitution (Grafana's would be a regex).
SENTINEL = "cluster-variable"
VALUES = {"cluster": SENTINEL, "job": "helios-exporter", "instance": "127.0.0.1:19400",
          "generation": ".*", "gpu": ".*", "datasource": "prometheus", "__rate_interval": "1m",
          "__interval": "15s", "__range": "3h"}
# Functions whose result has no labels of its input (or none at all).
LABEL_DROPPING_FUNCTIONS = frozenset({"scalar", "vector", "absent", "absent_over_time", "time"})


def violations(expr: str, label: str) -> list[str]:
    """Where `expr` could mix clusters, as short descriptions (empty when it keeps them apart)."""
    found: list[str] = []

    def visit(node: Any) -> bool:
        kind = type(node).__name__
        if kind == "VectorSelector":
            matchers = [(m.name, m.op, m.value) for m in node.matchers.matchers]
            if (label, promql_parser.MatchOp.Re, SENTINEL) not in matchers:
                found.append(f"selector without {label}=~\"$cluster\": {node}")
        elif kind == "AggregateExpr":
            modifier = node.modifier
            if modifier is None:
                found.append(f"aggregation over all labels: {node}")
            elif modifier.type == promql_parser.AggModifierType.By and label not in modifier.labels:
                found.append(f"aggregation drops {label}: {node.op} by ({', '.join(modifier.labels)})")
            elif modifier.type == promql_parser.AggModifierType.Without and label in modifier.labels:
                found.append(f"aggregation drops {label}: without ({', '.join(modifier.labels)})")
        elif kind == "BinaryExpr" and node.modifier is not None and node.modifier.matching is not None:
            matching = node.modifier.matching
            if matching.type == promql_parser.LabelModifierType.Include and label not in matching.labels:
                found.append(f"join not on {label}: on ({', '.join(matching.labels)})")
            elif matching.type == promql_parser.LabelModifierType.Exclude and label in matching.labels:
                found.append(f"join ignoring {label}")
        elif kind == "Call" and node.func.name in LABEL_DROPPING_FUNCTIONS and node.func.name != "time":
            found.append(f"{node.func.name}() drops {label}")
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def dashboard_expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL with variables substituted) of every panel target, annotation and variable
    query, except the cluster variable's own (it lists the clusters)."""
    return [(where, substitute(expr, VALUES)) for where, expr in all_expressions(dashboard)
            if not where.endswith("variable cluster")]


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_every_query_keeps_clusters_apart(dashboards: dict[str, Any], name: str) -> None:
    label = Settings.load().cluster_label
    expressions = dashboard_expressions(dashboards[name])
    assert len(expressions) > 10
    bad = {where: problems for where, expr in expressions if (problems := violations(expr, label))}
    assert bad == {}


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_the_cluster_variable(dashboards: dict[str, Any], name: str) -> None:
    label = Settings.load().cluster_label
    variables = {v["name"]: v for v in dashboards[name]["templating"]["list"]}
    cluster = variables["cluster"]
    assert cluster["query"].endswith(f", {label})")
    # All = .*, which matches series without the label: one Prometheus per cluster has none.
    assert cluster["multi"] and cluster["includeAll"] and cluster["allValue"] == ".*"
    assert cluster["current"]["value"] == "$__all"
    # It comes first: the other variables list only what the chosen clusters have.
    order = [v["name"] for v in dashboards[name]["templating"]["list"]]
    assert order[:3] == ["datasource", "cluster", "job"]


@pytest.mark.parametrize(("expr", "problem"), [
    ('up{job="x"}', "selector without cluster"),
    ('sum by (job, instance) (rate(a{cluster=~"cluster-variable"}[1m]))', "aggregation drops cluster"),
    ('count(a{cluster=~"cluster-variable"})', "aggregation over all labels"),
    ('max without (cluster) (a{cluster=~"cluster-variable"})', "aggregation drops cluster"),
    ('a{cluster=~"cluster-variable"} and on (job, instance) b{cluster=~"cluster-variable"}',
     "join not on cluster"),
    ('a{cluster=~"cluster-variable"} * ignoring (cluster) b{cluster=~"cluster-variable"}',
     "join ignoring cluster"),
    ('scalar(a{cluster=~"cluster-variable"})', "scalar() drops cluster"),
    ('a{cluster="cluster-variable"}', "selector without cluster"),  # = is not the variable's =~
])
def test_the_checker_finds_mixing(expr: str, problem: str) -> None:
    assert any(problem in v for v in violations(expr, "cluster")), violations(expr, "cluster")


def test_the_checker_accepts_what_keeps_clusters_apart() -> None:
    sel = '{cluster=~"cluster-variable", job=~"j"}'
    assert violations(f"sum by (cluster, job, instance) (rate(a{sel}[1m])) / (b{sel} > 0)",
                      "cluster") == []
    assert violations(f"(last_over_time(a{sel}[3h]) - time()) and on (cluster, job, instance) "
                      f"(c{sel} == 1)", "cluster") == []
    assert violations(f"a{sel} unless on (cluster, job, generation) (a{sel} offset 1m)",
                      "cluster") == []
    # A configured label name other than `cluster`.
    assert violations('sum by (k8s_cluster) (a{k8s_cluster=~"cluster-variable"})',
                      "k8s_cluster") == []
