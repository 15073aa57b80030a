"""The committed dashboard JSON: stable uids, variables, a unit and a description on every panel,
unique ids, `$__rate_interval` in every rate, PromQL that parses, a sane grid."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.models import units as sdk_units

from tests.dashboards.promql import (
    DASHBOARD_FILES,
    GRAFANA_BUILTINS,
    all_expressions,
    panels,
    substitute,
    targets,
    variables_used,
)

UIDS = {"helios-restore.json": "helios-restore", "helios-offload.json": "helios-offload",
        "helios-gpu.json": "helios-gpu"}
VARIABLES = {
    "helios-restore.json": ["datasource", "cluster", "job", "instance"],
    "helios-offload.json": ["datasource", "cluster", "job", "instance", "generation"],
    "helios-gpu.json": ["datasource", "cluster", "job", "instance", "gpu"],
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GRAFANA_UNITS = frozenset(v for v in vars(sdk_units).values() if isinstance(v, str))
RATE_FUNCTIONS = re.compile(r"\b(rate|irate|increase|delta|idelta|deriv)\s*\(")

# What Grafana would put in for the variables when checking that the PromQL parses.
SAMPLE_VALUES = {"cluster": ".*", "job": "helios-exporter", "instance": "127.0.0.1:19400", "generation": ".*",
                 "gpu": ".*", "datasource": "prometheus", "__rate_interval": "1m",
                 "__interval": "15s", "__range": "3h"}


def content_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in panels(dashboard) if p["type"] != "row"]


def rate_windows(expr: str) -> list[tuple[str, list[str]]]:
    """(function, range selectors inside its argument) for every rate-like call."""
    found = []
    for match in RATE_FUNCTIONS.finditer(expr):
        depth, end = 1, match.end()
        while depth and end < len(expr):
            depth += {"(": 1, ")": -1}.get(expr[end], 0)
            end += 1
        found.append((match.group(1), re.findall(r"\[([^\]]*)\]", expr[match.end():end])))
    return found


def bad_rate_windows(expr: str) -> list[str]:
    return [f"{fn}(...[{', '.join(windows) or 'no range'}])"
            for fn, windows in rate_windows(expr)
            if not windows or any(w != "$__rate_interval" for w in windows)]


def test_every_dashboard_file_is_there_with_its_stable_uid(dashboards: dict[str, Any]) -> None:
    assert sorted(dashboards) == sorted(DASHBOARD_FILES)
    for name, dashboard in dashboards.items():
        assert dashboard["uid"] == UIDS[name]
        assert dashboard["title"].startswith("Helios")
        assert content_panels(dashboard), name


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_variables(dashboards: dict[str, Any], name: str) -> None:
    variables = {v["name"]: v for v in dashboards[name]["templating"]["list"]}
    assert list(variables) == VARIABLES[name]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for var_name in VARIABLES[name][1:]:
        variable = variables[var_name]
        assert variable["type"] == "query", var_name
        assert variable["datasource"] == DATASOURCE, var_name
        assert re.fullmatch(rf"label_values\(\w+(\{{[^}}]*\}})?, {var_name}\)", variable["query"])
        assert variable["refresh"] == 2, "refresh on time range change: new generations appear"
        if variable.get("includeAll"):
            assert variable["allValue"] == ".*"


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_a_dashboard_opens_on_one_sidecar(dashboards: dict[str, Any], name: str) -> None:
    """All sidecars of a fleet in every panel is thousands of lines, answered in seconds each
    (docs/scale.md): the instance variable has no All and no current value, so Grafana opens on
    the first sidecar; several can be picked where the dashboard compares them."""
    (instance,) = [v for v in dashboards[name]["templating"]["list"] if v["name"] == "instance"]
    assert not instance.get("includeAll") and "allValue" not in instance
    assert not (instance.get("current") or {}).get("value")
    assert instance["multi"] == (name != "helios-restore.json")


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_every_panel_has_a_grafana_unit_and_a_description(dashboards: dict[str, Any],
                                                          name: str) -> None:
    for panel in content_panels(dashboards[name]):
        title = panel["title"]
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
        assert unit, f"{title}: no unit"
        assert unit in GRAFANA_UNITS or unit.startswith(("suffix:", "prefix:")), f"{title}: {unit}"
        for override in panel["fieldConfig"].get("overrides", []):
            for prop in override["properties"]:
                if prop["id"] == "unit":
                    assert prop["value"] in GRAFANA_UNITS or prop["value"].startswith("suffix:")
        description = panel.get("description", "")
        assert len(description) >= 40, f"{title}: description too short: {description!r}"


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_panel_ids_are_unique(dashboards: dict[str, Any], name: str) -> None:
    ids = [p["id"] for p in panels(dashboards[name])]
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(ids) == len(set(ids)), sorted(ids)
    titles = [p["title"] for p in content_panels(dashboards[name])]
    assert len(titles) == len(set(titles)), "panel titles name the panels in the e2e test"


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_every_query_runs_on_the_datasource_variable(dashboards: dict[str, Any], name: str) -> None:
    for panel in content_panels(dashboards[name]):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], f"{panel['title']}: no query"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    for entry in dashboards[name]["annotations"]["list"]:
        assert entry["datasource"] == DATASOURCE, entry["name"]


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_every_rate_uses_rate_interval(dashboards: dict[str, Any], name: str) -> None:
    bad = {where: bad_rate_windows(expr) for where, expr in all_expressions(dashboards[name])}
    assert {k: v for k, v in bad.items() if v} == {}
    assert any(rate_windows(expr) for _, expr in all_expressions(dashboards[name]))


def test_the_rate_interval_check_catches_fixed_windows() -> None:
    assert bad_rate_windows("sum(rate(a[$__rate_interval]))") == []
    assert bad_rate_windows("sum(rate(a[5m]))") == ["rate(...[5m])"]
    assert bad_rate_windows("increase(a[$__range])") == ["increase(...[$__range])"]
    assert bad_rate_windows("rate(a)") == ["rate(...[no range])"]
    assert bad_rate_windows("rate(a[$__rate_interval]) / irate(b[1m])") == ["irate(...[1m])"]
    assert bad_rate_windows("last_over_time(a[3h])") == []


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_queries_use_only_defined_variables(dashboards: dict[str, Any], name: str) -> None:
    defined = {v["name"] for v in dashboards[name]["templating"]["list"]} | GRAFANA_BUILTINS
    for where, expr in all_expressions(dashboards[name]):
        assert variables_used(expr) <= defined, where
    # Multi-value variables must be matched with =~ (Grafana joins the values with |).
    for where, expr in all_expressions(dashboards[name]):
        assert not re.search(r'[^=!]=\s*"\$', expr), f"{where}: use =~ for a variable"


@pytest.mark.e2e
def test_promql_of_every_dashboard_parses(dashboards: dict[str, Any], tmp_path: Any) -> None:
    """promtool checks the syntax of each expression, variables substituted, as a recording rule."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not on PATH (scripts/bootstrap installs Debian's prometheus)")
    rules: list[dict[str, Any]] = []
    for dashboard in dashboards.values():
        for i, (where, expr) in enumerate(all_expressions(dashboard)):
            rules.append({"record": f"dashboard:check_{len(rules)}_{i}:test",
                          "expr": substitute(expr, SAMPLE_VALUES), "labels": {"where": where}})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_grid_has_no_overlap(dashboards: dict[str, Any], name: str) -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in panels(dashboards[name]):
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = panel["title"]


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_annotations_mark_generations_and_restore_windows(dashboards: dict[str, Any],
                                                          name: str) -> None:
    annotations = {a["name"]: a for a in dashboards[name]["annotations"]["list"]}
    phases = {"Experiment phase"} if name == "helios-offload.json" else set()
    assert set(annotations) == {"New generation", "Restore window", *phases}
    if phases:
        assert annotations["Experiment phase"]["expr"].startswith("helios_experiment_phase_open{")
    assert "helios_monitoring_generation_info" in annotations["New generation"]["expr"]
    assert "helios_restore_window_open" in annotations["Restore window"]["expr"]
    assert all(a["enable"] and a["titleFormat"] for a in annotations.values())


def test_stat_and_table_panels_query_instantly(dashboards: dict[str, Any]) -> None:
    """Stats show the latest value and tables one row per series: an instant query each."""
    for dashboard in dashboards.values():
        for target in targets(dashboard):
            if target.panel_type in ("stat", "table"):
                assert target.instant, target.name
            else:
                assert not target.instant, target.name
