"""The runbooks work when followed literally, on each shipped deployment.

Every shell block of every runbook is pasted into bash after the deployment's Set up block, with
the commands that reach a cluster, Docker, a host, an Alertmanager or GPUs replaced by recorders
(tests/repo/runbooks/shim.py) and everything else real (jq, date, head, ...). What the blocks did is held
against the shipped manifests (tests/repo/runbooks/deployments.py: the instance label each scrape config
produces, where each deployment mounts the events token, which ports and Alertmanager it has) and
against the real code: the sidecar's routes, the events API's body model, the CLI's parser, a
`/status` rendered by a real sidecar (tests/repo/runbooks/status_sample.py), the metric names the sidecar
exports or the rules record, and PromQL parsed by promql-parser. This file checks the Set up
blocks (written once, on docs/runbooks/README.md, which every runbook's Set up section links
to), the queries and the `/status` fields the prose names; `test_runbook_blocks.py` runs every
other block (against a sidecar that answers and one that does not); `test_runbook_amtool_e2e.py`
runs the amtool commands against a real Alertmanager.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import promql_parser
import pytest

from tests.conftest import ROOT
from tests.dashboards.promql import known_metrics
from tests.repo.runbooks.deployments import DEPLOYMENTS, Deployment
from tests.repo.runbooks.runbook_check import TOKEN, UNREACHABLE, Sample, SetUps, call_problems
from tests.repo.runbooks.runbook_doc import SECTIONS, SETUP_LINK, Runbook, runbooks, setup_page, status_fields

RUNBOOKS = runbooks()
IDS = [r.name for r in RUNBOOKS]
PAGE = setup_page()


# -- the tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("runbook", RUNBOOKS, ids=IDS)
def test_sections_in_order(runbook: Runbook) -> None:
    """What it means, how to reach it, what to check, what to do, what its resolve means."""
    headings = [h for h in runbook.headings() if h in SECTIONS]
    assert headings == list(SECTIONS), f"{runbook.name}: sections {runbook.headings()}"
    # Its Set up section links to the common page, whose blocks every deployment has.
    assert SETUP_LINK in runbook.set_up_text(), runbook.name
    assert set(runbook.setup_blocks()) == set(DEPLOYMENTS), runbook.name
    assert runbook.setup_blocks() == PAGE.setup_blocks()


@pytest.mark.parametrize("dep", DEPLOYMENTS)
def test_set_up_points_at_what_the_deployment_really_has(dep: str, setups: SetUps,
                                                         sample: Sample) -> None:
    """The common page's block of each deployment (docs/runbooks/README.md)."""
    setup = setups(PAGE, dep)
    r, ran = setup.reach, setup.alive
    assert ran.problems() == [], ran.stderr
    wanted = {"INSTANCE": r.deployment.instance, "CLUSTER": "", "SIDECAR": r.sidecar,
              "ENGINE": r.engine, "AM_URL": r.am_url, "TOKEN": TOKEN}
    assert {k: ran.variables.get(k) for k in wanted} == wanted, ran.script
    events: list[str] = []
    assert [p for call in ran.calls for p in call_problems(call, r, sample, events)] == []
    assert UNREACHABLE not in ran.stdout
    assert setup.dead.stdout.count(UNREACHABLE) == 1, setup.dead.stdout


def exported_metrics() -> set[str]:
    """Every series name of the whole /metrics of a real sidecar (tests/golden/
    full_exposition.prom, which tests/exporter/test_full_exposition.py keeps equal to it)."""
    text = (ROOT / "tests" / "golden" / "full_exposition.prom").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([a-zA-Z_:][\w:]*)(?:\{| )", text, re.M)}


def _selectors(expr: str) -> list[Any]:
    found: list[Any] = []

    def visit(node: Any) -> bool:
        if type(node).__name__ == "VectorSelector":
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=IDS)
def test_queries_parse_and_select_this_target(runbook: Runbook,
                                              deployments: dict[str, Deployment]) -> None:
    """Every query parses, names only metrics the sidecar exports (the README's table, or a
    real sidecar's /metrics) or the rules record, and
    selects the paged target: job, and the instance and cluster labels the deployment produces
    (`<instance>` and `<cluster>` in the runbook, copied from the page)."""
    known, exported = known_metrics(), exported_metrics()
    queries = runbook.queries()
    assert queries, f"{runbook.name} has no query"
    failures = []
    for block, query in queries:
        for d in deployments.values():
            for cluster in ("", "eu-west-1a"):
                expr = query.replace("<instance>", d.instance).replace("<cluster>", cluster)
                if re.search(r"<[a-z_]+>", expr):
                    failures.append(f"{block.where}: a placeholder other than <instance>/<cluster>: {query}")
                    break
                try:
                    selectors = _selectors(expr)
                except Exception as exc:  # promql-parser raises plain exceptions
                    failures.append(f"{block.where}: does not parse: {query}: {exc}")
                    break
                for s in selectors:
                    matchers = {(m.name, str(m.op), m.value) for m in s.matchers.matchers}
                    labels = {(n, v) for n, _, v in matchers}
                    if s.name not in known and s.name not in exported:
                        failures.append(f"{block.where}: {s.name} is neither exported nor recorded")
                    if ("job", d.job) not in labels:
                        failures.append(f"{block.where}: {s.name} without job=\"{d.job}\"")
                    if ("cluster", cluster) not in labels:
                        failures.append(f"{block.where}: {s.name} without cluster=\"<cluster>\"")
                    if s.name != "up" and ("instance", d.instance) not in labels:
                        failures.append(f"{block.where}: {s.name} without instance=\"<instance>\"")
    assert sorted(set(failures)) == []


def _jq_null_paths(doc_file: str, paths: set[str]) -> list[str]:
    missing = []
    for path in sorted(paths):
        # every value the path reaches, as one array (`jq -e` would also refuse a real `false`)
        result = subprocess.run(["jq", "-c", "[." + path.replace("[]", "[]?") + "]", doc_file],
                                capture_output=True, text=True, timeout=30, check=False)
        values = json.loads(result.stdout) if result.returncode == 0 else []
        if not values or None in values:
            missing.append(path)
    return missing


@pytest.mark.parametrize("runbook", [PAGE, *RUNBOOKS], ids=["set-up", *IDS])
def test_status_fields_it_names_exist(runbook: Runbook, sample: Sample) -> None:
    """The `/status` fields the prose tells people to read are in a real `/status`."""
    fields = status_fields(runbook.prose(), set(sample.status))
    assert _jq_null_paths(sample.files["GET /status"], fields) == []


def test_window_closed_409_is_explained() -> None:
    """Every runbook that sends window_closed says it is refused with 409 while the engine is
    unreachable, and what to do instead."""
    for runbook in RUNBOOKS:
        if '"event\\": \\"window_closed' in runbook.text or "window_closed\\\"" in runbook.text:
            assert "409" in runbook.prose(), runbook.name


def test_the_engine_paths_runbooks_may_call_are_the_engines() -> None:
    """The engine routes the curl check accepts are served by the simulated engine (which
    serves the engine's API), so a runbook cannot send people to an engine path that is not."""
    from simulator.app import build_app
    from tests.repo.runbooks.runbook_check import ENGINE_PATHS
    from tests.simulator.harness import idle_engine

    engine, _ = idle_engine()
    served = {route.path for route in build_app(engine).routes}
    assert served >= ENGINE_PATHS
