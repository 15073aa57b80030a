"""Dashboards as others import and lint them: grafana.com's import metadata (`__inputs`,
`__requires` for the Grafana of deploy/compose), and dashboards/.lint, the exceptions to
grafana/dashboard-linter's rules. The linter itself is a Go program not obtainable on the test
machines; these tests hold the file to the linter's rule names and to the dashboards: every
exception names a rule the linter has, states its reason, and still applies."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import promql_parser as pp
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
# The rules of grafana/dashboard-linter at commit 4d0844b40d49cbfd442916fc6c0c3c6fc81084e3
# (lint/rules.go, Apache-2.0).
LINTER_RULES = {
    "template-datasource-rule", "template-job-rule", "template-instance-rule",
    "template-label-promql-rule", "template-on-time-change-reload-rule", "panel-datasource-rule",
    "panel-title-description-rule", "panel-units-rule", "panel-no-targets-rule",
    "target-logql-rule", "target-logql-auto-rule", "target-promql-rule",
    "target-rate-interval-rule", "target-job-rule", "target-instance-rule",
    "target-counter-agg-rule", "uneditable-dashboard",
}


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in panels:
        out.append(p)
        out += _panels(p.get("panels", []))
    return out


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_grafana_com_import_metadata(path: Path) -> None:
    data = _load(path)
    compose = (ROOT / "deploy/compose/docker-compose.yaml").read_text(encoding="utf-8")
    (version,) = re.findall(r"image:\s*grafana/grafana:(\S+)", compose)
    assert data["__inputs"] == []  # the datasource variable picks the Prometheus
    requires = {(r["type"], r["id"]): r for r in data["__requires"]}
    assert requires[("grafana", "grafana")]["version"] == version
    assert ("datasource", "prometheus") in requires
    used = {p["type"] for p in _panels(data["panels"]) if p["type"] != "row"}
    assert {i for t, i in requires if t == "panel"} == used
    (ds,) = [v for v in data["templating"]["list"] if v["type"] == "datasource"]
    assert ds["query"] == "prometheus"


@pytest.fixture(scope="module")
def lint() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "dashboards/.lint").read_text(encoding="utf-8"))
    return doc


def test_every_exception_is_a_linter_rule_with_a_reason(lint: dict[str, Any]) -> None:
    assert set(lint) <= {"exclusions", "warnings"}
    titles = {_load(p)["title"]: {q["title"] for q in _panels(_load(p)["panels"])} for p in DASHBOARDS}
    for section in lint.values():
        for rule, entry in section.items():
            assert rule in LINTER_RULES, rule
            assert entry and len(entry.get("reason", "")) > 40, f"{rule}: say why"
            for e in entry.get("entries", []):
                assert e["dashboard"] in titles and e["panel"] in titles[e["dashboard"]], e


def _counter_breaches(expr: str) -> bool:
    """target-counter-agg-rule: a *_total selector not read by rate, irate or increase."""
    def walk(node: Any, parents: tuple[Any, ...]) -> bool:
        if isinstance(node, pp.VectorSelector) and (node.name or "").endswith("_total"):
            ok = (len(parents) >= 2 and isinstance(parents[-1], pp.MatrixSelector)
                  and isinstance(parents[-2], pp.Call)
                  and parents[-2].func.name in ("rate", "irate", "increase"))
            if not ok:
                return True
        for attr in ("expr", "lhs", "rhs", "param", "vector_selector", "args"):
            child = getattr(node, attr, None)
            for c in child if isinstance(child, list) else [child]:
                if c is not None and not isinstance(c, int | float | str) and walk(c, (*parents, node)):
                    return True
        return False

    return walk(pp.parse(re.sub(r"\$\{?__\w+\}?", "5m", expr)), ())


def test_every_exception_still_applies(lint: dict[str, Any]) -> None:
    """A stale exception hides the next real breach; these are the linter's checks for the
    excepted rules (lint/rule_uneditable.go, rule_template_job.go, rule_target_counter_agg.go)."""
    excluded = lint["exclusions"]
    dashboards = [_load(p) for p in DASHBOARDS]
    assert any(d.get("editable") for d in dashboards) == ("uneditable-dashboard" in excluded)
    for name in ("job", "instance"):
        breaks = [d["title"] for d in dashboards for v in d["templating"]["list"]
                  if v["name"] == name and (not v.get("multi") or v.get("allValue") != ".+")]
        assert bool(breaks) == (f"template-{name}-rule" in excluded), name
    found = sorted({(d["title"], p["title"]) for d in dashboards for p in _panels(d["panels"])
                    for t in p.get("targets", []) if t.get("expr") and _counter_breaches(t["expr"])})
    listed = sorted((e["dashboard"], e["panel"]) for e in excluded["target-counter-agg-rule"]["entries"])
    assert found == listed
