"""SGLang- and vLLM-shaped engines end to end on 127.0.0.1: `simulate --flavor sglang` and
`--flavor vllm` (scenario late-reuse: 90 new prompts that store and never restore, then the
same prompts restored from the host tier), each watched by a sidecar of the matching
`--engine-kind`, both scraped by one real Prometheus evaluating the SHIPPED rule files.

Two changes to the shipped rules, so the test waits seconds instead of hours:
HeliosOffloadHostTierNoReuse's `for:` (30m) is 0s, and its step rules (helios-offload-steps,
one step every 5 minutes: alerts/promql.py STEP_GUARD) write a step every evaluation. The
expressions are otherwise the shipped ones.

- The alert fires on the SGLang-shaped host tier while it stores without reuse, and resolves
  once load-backs are counted.
- Every query of the shipped dashboards, variables substituted as Grafana would, answers
  without an error for both kinds, and a query with no data reads at least one family that the
  sidecar's live coverage (`helios_engine_signal_coverage{source="absent"}`) says this engine
  does not supply. The GPU dashboard is not engine-dependent (the sidecars run without NVML:
  tests/dashboards/test_panels_live.py proves it), and the restore dashboard's panels that need
  a window that opened or closed are left out as there: no outage is played here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from alerts.promql import STEP_GUARD
from exporter.engines.inert import _feeds, inputs
from tests.dashboards.promql import DASHBOARD_DIR, load, substitute, targets
from tests.e2e.procs import ROOT, Proc, Stack, free_port, query, wait_for
from tests.process_guard import process_fixture

pytestmark = pytest.mark.e2e

ALERT = "HeliosOffloadHostTierNoReuse"
STEPS_GROUP = "helios-offload-steps"
RATE = "2"  # requests a second: 45 s of stores without reuse, then reuse from the host tier
KINDS = ("sglang", "vllm")
DASHBOARDS = ("helios-offload.json", "helios-restore.json")
# Restore panels that need a window that opened, closed, or a sidecar serving TLS.
NEEDS_A_WINDOW = {"Post-restore checks", "Last window outcome", "Last window duration",
                  "Time to request cutoff", "Time to restore deadline", "Window cause",
                  "Window elapsed", "Certificate expiry", "Deadlines counting down"}
# Read where the engine exports its process start or its counters' `_created`: SGLang's
# multiprocess registry exports neither, so its generation is known from counter resets only
# (/status engine_kind.generation_from) and has no start time.
START_TIME = "helios_monitoring_generation_start_timestamp_seconds"


def compressed_rules(tmp: Path) -> list[Path]:
    """The shipped rule files, with the alert's `for:` at 0s and its steps every evaluation."""
    doc = yaml.safe_load((ROOT / "alerts" / "helios-alerts.yaml").read_text())
    groups = {g["name"]: g for g in doc["groups"]}
    [rule] = [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    assert rule["for"] == "30m"  # what ships
    rule["for"] = "0s"
    guard = f"[{STEP_GUARD}]"
    for step in groups[STEPS_GROUP]["rules"]:
        assert guard in step["expr"]
        step["expr"] = step["expr"].replace(guard, "[1s]")
    alerts = tmp / "helios-alerts.yaml"
    alerts.write_text(yaml.safe_dump(doc, sort_keys=False))
    return [alerts, ROOT / "alerts" / "helios-recording.yaml"]


def records(rule_files: list[Path]) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in rule_files:
        for group in yaml.safe_load(path.read_text())["groups"]:
            out |= {r["record"]: r["expr"] for r in group["rules"] if "record" in r}
    return out


@dataclass
class Live:
    prom: str
    instances: dict[str, str]  # kind -> the sidecar's instance
    engines: dict[str, str]  # kind -> the engine's URL
    records: dict[str, str]
    start: float
    logs: list[Proc]

    def tails(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.tail(15)}" for p in self.logs)


@process_fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("engine-flavors")
    stack = Stack(tmp)
    try:
        rules = compressed_rules(tmp)
        ports = {kind: free_port() for kind in KINDS}
        instances = {kind: f"127.0.0.1:{port}" for kind, port in ports.items()}
        # Prometheus first: it watches before the first phase of the scenario starts.
        prom_proc, prom = stack.prometheus(list(instances.values()), rule_files=rules)
        logs, engines = [prom_proc], {}
        for kind in KINDS:
            engine, engines[kind] = stack.simulator("late-reuse", "--flavor", kind, "--rate",
                                                    RATE, "--seed", "5", name=f"engine-{kind}")
            sidecar, _ = stack.sidecar(engines[kind], "--engine-kind", kind, "--poll-interval",
                                       "0.5", port=ports[kind], name=f"sidecar-{kind}")
            logs += [engine, sidecar]
        yield Live(prom, instances, engines, records(rules), time.time(), logs)
    finally:
        stack.stop_all()


def phase(engine_url: str) -> str:
    return str(httpx.get(engine_url + "/admin/state", timeout=5).json()["scenario"]["phase"])


def firing(live: Live, kind: str) -> list[dict[str, Any]]:
    return query(live.prom, f'ALERTS{{alertname="{ALERT}", alertstate="firing", '
                            f'instance="{live.instances[kind]}"}}')


def test_no_reuse_fires_on_an_sglang_host_tier_that_stores_and_resolves_when_loads_come(
        live: Live) -> None:
    wait_for(lambda: firing(live, "sglang"), 40, f"{ALERT} firing", live.logs[0])
    assert phase(live.engines["sglang"]) == "stores without reuse", live.tails()
    restored = f'helios_offload_host_tokens_restored_total{{instance="{live.instances["sglang"]}"}}'
    assert [float(r["value"][1]) for r in query(live.prom, restored)] == [0.0]  # 0, not absent
    wait_for(lambda: phase(live.engines["sglang"]) == "reuse from host", 60,
             "the scenario's reuse phase")
    wait_for(lambda: query(live.prom, f"{restored} > 0"), 20, "load-backs in Prometheus")
    wait_for(lambda: not firing(live, "sglang"), 20, f"{ALERT} resolved", live.logs[0])


def absent_signals(live: Live, kind: str) -> set[str]:
    rows = query(live.prom, 'helios_engine_signal_coverage{source="absent", '
                            f'instance="{live.instances[kind]}"}}')
    return {r["metric"]["signal"] for r in rows}


def absent_by_coverage(expr: str, records: dict[str, str], absent: set[str]) -> list[str]:
    """The families `expr` reads (through recording rules) that the engine does not supply:
    every signal feeding the family (those the expression's label values select, if any) is
    absent."""
    feeds, out = _feeds(), []
    selected = set(re.findall(r'="([A-Za-z_]+)"', expr))
    for family in inputs(expr, records):
        signals = feeds[family]
        chosen = [s for s in signals if s.rpartition(".")[2] in selected] or list(signals)
        if all(s in absent for s in chosen):
            out.append(family)
    return out


def grafana_values(live: Live, kind: str, at: float) -> dict[str, str]:
    instance = live.instances[kind]
    rows = query(live.prom, f'helios_monitoring_generation_info{{instance="{instance}"}}')
    generation = "|".join(sorted({r["metric"]["generation"] for r in rows})) or ".*"
    return {"cluster": ".*", "job": "helios-exporter", "instance": instance,
            "generation": generation, "__rate_interval": "4s", "__interval": "1s",
            "__range": f"{max(1, int(at - live.start))}s"}


def answer(live: Live, expr: str, instant: bool, at: float) -> list[Any]:
    if instant:
        resp = httpx.get(f"{live.prom}/api/v1/query", params={"query": expr, "time": at},
                         timeout=10)
    else:
        resp = httpx.get(f"{live.prom}/api/v1/query_range", timeout=10, params={
            "query": expr, "start": live.start, "end": at, "step": 1})
    assert resp.status_code == 200, f"{expr}: {resp.text}"
    result: list[Any] = resp.json()["data"]["result"]
    return result


@pytest.mark.parametrize("kind", KINDS)
def test_every_dashboard_query_has_data_or_its_inputs_are_absent_by_coverage(
        live: Live, kind: str) -> None:
    wait_for(lambda: phase(live.engines[kind]) == "reuse from host", 90,
             "the scenario's reuse phase")
    wait_for(lambda: query(live.prom, 'helios_offload_host_tokens_restored_total{instance="'
                           f'{live.instances[kind]}"}} > 0'), 20, "load-backs in Prometheus")
    time.sleep(3)  # a few scrapes of the reuse phase: rates over it
    absent = absent_signals(live, kind)
    assert absent, f"no coverage series for {kind}"
    status = httpx.get(f"http://{live.instances[kind]}/status", timeout=5).json()
    no_start = status["engine_kind"]["generation_from"] == "counter_reset"
    at = time.time()
    values = grafana_values(live, kind, at)
    checked = 0
    unexplained: list[str] = []
    by_coverage: list[str] = []
    with_data: list[str] = []
    for name in DASHBOARDS:
        for target in targets(load(name, DASHBOARD_DIR)):
            if target.panel in NEEDS_A_WINDOW:
                continue
            expr = substitute(target.expr, values)
            checked += 1
            if answer(live, expr, target.instant, at):
                with_data.append(target.expr)
                continue
            missing = absent_by_coverage(target.expr, live.records, absent)
            if no_start and START_TIME in target.expr:
                missing.append(START_TIME)
            (by_coverage if missing else unexplained).append(f"{target.name}: {expr}")
    assert checked > 20
    assert not unexplained, ("empty, with every input supplied:\n  " + "\n  ".join(unexplained)
                             + "\n" + live.tails())
    # The host tier's reuse shows on the shipped dashboard.
    assert any("helios_offload_host_tokens_restored_total" in e for e in with_data), by_coverage
