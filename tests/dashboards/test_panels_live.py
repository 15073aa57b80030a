"""No empty panel: every query of the three dashboards, variables substituted as Grafana would,
returns series from a real Prometheus scraping real sidecars, all on 127.0.0.1.

One stack serves the whole module (about 40 s):

- engine A serves steady traffic, then goes through an outage driven through its /admin
  endpoints once Prometheus scrapes everything (a fixed timeline from the engine's start would
  be missed when the machine is slow to start the rest): drained, stopped, restored. Its
  sidecar (`--request-cutoff 20 --restore-bound 40 --down-grace 2`) opens a restore window when
  it drains and closes it after the restore. The restore dashboard is queried at a moment while
  the window is open and the engine is down, and its post-restore panels after the window
  closed.
- engine B plays `reverse-replay` (row pressure while pages sit free) and serves snapshot schema 3
  (the host tier's store outcomes, eviction ages, blocked and prompt tokens, restore transfers:
  the offload dashboard's v3 row; its v1 fields are those of schema 1); its sidecar reads GPUs from
  the fake NVML library of tools/fake_nvml.py (compiled here), whose UUIDs are set to engine B's ranks.
  The offload and GPU dashboards are queried on it.
- Two clusters, as a global view (Thanos, Mimir) sees them: both sidecars are scraped with
  cluster="east"; sidecar B is scraped a second time with cluster="west" under sidecar A's
  instance name. So one job and instance exist in two clusters with different data, and every
  panel must keep them apart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.dashboards.promql import ROOT, Target, substitute, targets, variable_query_expr
from tests.e2e.procs import Proc, Stack, free_port, http_ok, need, query, wait_for
from tests.process_guard import process_fixture

pytestmark = pytest.mark.e2e

JOB = "helios-exporter"
EAST, WEST = "east", "west"  # the cluster label of the two clusters
SCRAPE_INTERVAL_S = 1  # Stack.prometheus: 1 s scrape and evaluation interval
# Grafana: $__rate_interval = max($__interval + scrape interval, 4 x scrape interval).
RATE_INTERVAL = f"{4 * SCRAPE_INTERVAL_S}s"
RESTORE_SIDECAR = ("--poll-interval", "0.5", "--request-cutoff", "20", "--restore-bound", "40",
                   "--down-grace", "2")
# Restore panels that show the last closed window: empty until one closed.
AFTER_CLOSE = {"Post-restore checks", "Last window outcome", "Last window duration"}
# Restore panels of a sidecar serving TLS: this stack scrapes plain HTTP; tests/e2e/
# test_tls_e2e.py evaluates them against a real Prometheus scraping over TLS.
WITH_TLS = {"Certificate expiry"}
# Restore panels that exist only while a window is open.
WHILE_OPEN = {"Time to request cutoff", "Time to restore deadline", "Window cause",
              "Window elapsed"}
# Offload panels of another engine kind (`serve --engine-kind sglang|vllm`): on a Helios engine
# nothing is absent, so they stay empty (tests/e2e/test_engine_flavors_e2e.py fills them).
OTHER_KINDS = {"Not exported by this engine"}
THROTTLE_SW_POWER_CAP = 0x004


@dataclass
class Live:
    prom: str
    restore_instance: str
    offload_instance: str
    start: float  # Prometheus is up and scraping
    window_at: float = 0.0  # the restore window is open and engine A is down
    closed_at: float = 0.0  # the window has closed and its checks are exported
    incumbent: str = ""  # engine A's generation before the outage
    gpu_skip: str = ""  # why the GPU dashboard could not be proven live, if it could not
    logs: list[Proc] = field(default_factory=list)

    def tails(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.tail(15)}" for p in self.logs)


def instant(prom: str, expr: str, at: float) -> list[dict[str, Any]]:
    resp = httpx.get(f"{prom}/api/v1/query", params={"query": expr, "time": at}, timeout=10.0)
    assert resp.status_code == 200, f"{expr}: {resp.text}"
    result: list[dict[str, Any]] = resp.json()["data"]["result"]
    return result


def range_query(prom: str, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    resp = httpx.get(f"{prom}/api/v1/query_range", timeout=10.0, params={
        "query": expr, "start": start, "end": end, "step": SCRAPE_INTERVAL_S})
    assert resp.status_code == 200, f"{expr}: {resp.text}"
    result: list[dict[str, Any]] = resp.json()["data"]["result"]
    return result


def label_values(prom: str, selector: str, label: str, start: float, end: float) -> list[str]:
    resp = httpx.get(f"{prom}/api/v1/label/{label}/values", timeout=10.0,
                     params={"match[]": selector, "start": start, "end": end})
    resp.raise_for_status()
    return sorted(resp.json()["data"])


def grafana_values(instance: str, start: float, end: float, **extra: str) -> dict[str, str]:
    return {"cluster": EAST, "job": JOB, "instance": instance, "__rate_interval": RATE_INTERVAL,
            "__interval": f"{SCRAPE_INTERVAL_S}s", "__range": f"{int(end - start)}s", **extra}


def run_target(live: Live, target: Target, values: dict[str, str], at: float) -> list[Any]:
    """The target's query as its panel sends it: instant at `at`, or a range ending at `at`."""
    expr = substitute(target.expr, values)
    if target.instant:
        return instant(live.prom, expr, at)
    return range_query(live.prom, expr, live.start, at)


def report(empty: list[str], live: Live) -> str:
    return "empty panels:\n  " + "\n  ".join(empty) + "\n" + live.tails()


def empty_targets(live: Live, dashboard: dict[str, Any], values: dict[str, str], at: float,
                  only: set[str] | None = None, skip: frozenset[str] | set[str] = frozenset(),
                  ) -> list[str]:
    checked, empty = 0, []
    for target in targets(dashboard):
        if (only is not None and target.panel not in only) or target.panel in skip:
            continue
        checked += 1
        if not run_target(live, target, values, at):
            empty.append(f"{target.name}: {substitute(target.expr, values)}")
    assert checked, "no target checked"
    return empty


# -- the stack ---------------------------------------------------------------------------------

def build_fake_nvml(tmp: Path) -> tuple[Path | None, str]:
    """The fake libnvidia-ml.so.1 of tools/fake_nvml.py, or None and why it could not be built."""
    try:
        from tools.fake_nvml import build, find_compiler, find_header
    except ImportError as exc:
        return None, f"tools/fake_nvml.py is not importable: {exc}"
    header, compiler = find_header(), find_compiler()
    if header is None or compiler is None:
        return None, f"the fake NVML needs nvml.h (found {header}) and a C compiler ({compiler})"
    return build(tmp / "fake-nvml", header=header, compiler=compiler), ""


def write_fake_gpus(config: Path, engine_url: str) -> None:
    """Two GPUs carrying the engine's rank UUIDs, GPU 0 power-capped near its limit."""
    from tools.fake_nvml import FakeConfig

    ranks = httpx.get(engine_url + "/debug/offload/snapshot", timeout=5.0).json()["ranks"]
    gpus: dict[int, dict[str, object]] = {
        r["rank"]: {"uuid": r["gpu_uuid"], "util": 87, "power_mw": 640_000, "temp": 71}
        for r in ranks}
    gpus[0].update(reasons=THROTTLE_SW_POWER_CAP, power_mw=695_000)
    FakeConfig(config).write(count=len(gpus), gpus=gpus, driver="550.54.15")


def nvml_sidecar(stack: Stack, engine_url: str, library: Path, config: Path) -> tuple[Proc, str]:
    """Stack.sidecar without --no-nvml: pynvml dlopen()s libnvidia-ml.so.1, found through
    LD_LIBRARY_PATH in the fake's directory."""
    proc, url = stack.sidecar(
        engine_url, "--poll-interval", "0.5", state_dir=stack.tmp / "state-offload",
        name="sidecar-offload", nvml=True, wait=False,
        env={"LD_LIBRARY_PATH": str(library.parent), "FAKE_NVML_CONFIG": str(config)})
    wait_for(lambda: http_ok(url + "/readyz"), 30, "sidecar with fake NVML ready", proc)
    return proc, url


def admin(engine_url: str, action: str, body: dict[str, Any] | None = None) -> None:
    """The simulated engine's /admin endpoints: the engine team's side of an outage."""
    httpx.post(f"{engine_url}/admin/{action}", json=body or {}, timeout=10).raise_for_status()


def two_cluster_prometheus(stack: Stack, a: str, b: str, rules: list[Path]) -> tuple[Proc, str]:
    """A real Prometheus scraping sidecars A and B as cluster east, and B again as cluster west
    under A's instance name (the static `instance` label wins over the address)."""
    port = free_port()
    config = {
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s",
                   "evaluation_interval": f"{SCRAPE_INTERVAL_S}s"},
        "rule_files": [str(r) for r in rules],
        "scrape_configs": [{"job_name": JOB, "static_configs": [
            {"targets": [a, b], "labels": {"cluster": EAST}},
            {"targets": [b], "labels": {"cluster": WEST, "instance": a}},
        ]}],
    }
    path = stack.tmp / f"prometheus-{port}.yml"
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    proc = stack.start("prometheus", [
        need("prometheus"), f"--config.file={path}", f"--storage.tsdb.path={stack.tmp / 'prom'}",
        f"--web.listen-address=127.0.0.1:{port}"])
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: http_ok(url + "/-/ready"), 60, "prometheus ready", proc)
    return proc, url


@process_fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("dashboards-live")
    stack = Stack(tmp)
    try:
        yield play(stack, tmp)
    finally:
        stack.stop_all()


def play(stack: Stack, tmp: Path) -> Live:
    library, gpu_skip = build_fake_nvml(tmp)
    engine_a, engine_a_url = stack.simulator("steady", "--seed", "3")
    sidecar_a, sidecar_a_url = stack.sidecar(engine_a_url, *RESTORE_SIDECAR,
                                             state_dir=tmp / "state-restore", name="sidecar-restore")
    engine_b, engine_b_url = stack.simulator("reverse-replay", "--seed", "7", "--rate", "8",
                                             "--snapshot-version", "3")
    if library is not None:
        config = tmp / "gpus.conf"
        write_fake_gpus(config, engine_b_url)
        sidecar_b, sidecar_b_url = nvml_sidecar(stack, engine_b_url, library, config)
    else:
        sidecar_b, sidecar_b_url = stack.sidecar(engine_b_url, "--poll-interval", "0.5",
                                                 state_dir=tmp / "state-offload",
                                                 name="sidecar-offload")
    a, b = (u.removeprefix("http://") for u in (sidecar_a_url, sidecar_b_url))
    rules = sorted((ROOT / "alerts").glob("helios-*.yaml"))
    prom_proc, prom = two_cluster_prometheus(stack, a, b, rules)
    live = Live(prom, a, b, time.time(), gpu_skip=gpu_skip,
                logs=[engine_a, sidecar_a, engine_b, sidecar_b, prom_proc])
    wait_for(lambda: query(prom, f'up{{instance="{b}"}} == 1'), 20, "first scrapes", prom_proc)
    wait_for(lambda: query(prom, f'up{{cluster="{WEST}"}} == 1'), 20, "west scraped", prom_proc)

    east_a = f'cluster="{EAST}", instance="{a}"'  # sidecar A (west has another under its name)
    incumbent = wait_for(lambda: query(prom, f"helios_monitoring_generation_info{{{east_a}}}"),
                         20, "engine A's generation", sidecar_a)
    live.incumbent = incumbent[0]["metric"]["generation"]
    admin(engine_a_url, "admission", {"state": "draining"})
    wait_for(lambda: query(prom, f'helios_restore_phase{{{east_a}, phase="drained"}} == 1'),
             60, "engine A drained with the window open", sidecar_a)
    admin(engine_a_url, "crash")
    wait_for(lambda: query(prom, f'helios_restore_phase{{{east_a}, phase="down"}} == 1'),
             60, "engine A down with the window open", sidecar_a)
    time.sleep(3)  # a few scrapes of the down phase: error rates, countdowns
    live.window_at = time.time() - 0.5
    assert instant(prom, f"helios_restore_window_open{{{east_a}}} == 1", live.window_at), \
        live.tails()

    admin(engine_a_url, "restart", {"container": "same"})
    wait_for(lambda: query(prom, f"helios_restore_check_ok{{{east_a}}}"), 60,
             "the post-restore checks after the window closed", sidecar_a)
    time.sleep(1.5)
    live.closed_at = time.time() - 0.5
    return live


# -- the tests ---------------------------------------------------------------------------------

def test_restore_panels_while_the_window_is_open(live: Live, dashboards: dict[str, Any]) -> None:
    restore = dashboards["helios-restore.json"]
    values = grafana_values(live.restore_instance, live.start, live.window_at)
    empty = empty_targets(live, restore, values, live.window_at, skip=AFTER_CLOSE | WITH_TLS)
    assert empty == [], report(empty, live)
    phase = instant(live.prom, substitute(
        next(t.expr for t in targets(restore) if t.panel == "Restore phase"), values),
        live.window_at)
    assert [r["metric"]["phase"] for r in phase] == ["down"]
    for title in ("Time to request cutoff", "Time to restore deadline"):
        (left,) = run_target(live, next(t for t in targets(restore) if t.panel == title), values,
                             live.window_at)
        assert 0 < float(left["value"][1]) < 40, title  # counting down from the compressed bounds


def test_restore_panels_after_the_window_closed(live: Live, dashboards: dict[str, Any]) -> None:
    restore = dashboards["helios-restore.json"]
    values = grafana_values(live.restore_instance, live.start, live.closed_at)
    empty = empty_targets(live, restore, values, live.closed_at, only=AFTER_CLOSE)
    assert empty == [], report(empty, live)
    checks = run_target(live, next(t for t in targets(restore) if t.panel == "Post-restore checks"),
                        values, live.closed_at)
    assert {r["metric"]["check"]: r["value"][1] for r in checks} == {
        "image": "1", "container": "1", "package": "1", "checkpoint": "1", "fresh_generation": "1",
        "drained_admission": "1"}
    # The countdowns disappear with the window (they would otherwise show a stale deadline).
    still_there = [t.name for t in targets(restore) if t.panel in WHILE_OPEN and t.instant
                   and run_target(live, t, values, live.closed_at)]
    assert still_there == []


def test_offload_panels(live: Live, dashboards: dict[str, Any]) -> None:
    offload = dashboards["helios-offload.json"]
    generations = label_values(live.prom, f'helios_monitoring_generation_info{{job="{JOB}", '
                               f'instance="{live.offload_instance}"}}', "generation",
                               live.start, live.closed_at)
    assert len(generations) == 1
    values = grafana_values(live.offload_instance, live.start, live.closed_at,
                            generation=generations[0])
    empty = empty_targets(live, offload, values, live.closed_at, skip=OTHER_KINDS)
    assert empty == [], report(empty, live)
    # ... and the other kinds' panels are empty on a Helios engine: it exports every signal.
    for target in (t for t in targets(offload) if t.panel in OTHER_KINDS):
        assert run_target(live, target, values, live.closed_at) == [], target.name
    # reverse-replay is the row-pressure-with-page-headroom scenario: the evidence panel counts it.
    (evidence,) = run_target(live, next(t for t in targets(offload)
                                        if t.panel == "Row pressure with page headroom"),
                             values, live.closed_at)
    assert float(evidence["value"][1]) > 0
    # ... and its forward passes hit: the host tier's payoff is a share above 0 and at most 1.
    payoff = run_target(live, next(t for t in targets(offload) if t.panel == "Host tier payoff"),
                        values, live.closed_at)
    shares = {r["metric"]["source"]: max(float(v) for _, v in r["values"]) for r in payoff}
    assert set(shares) == {"gpu_prefix", "host_restored"}, payoff
    assert 0 < shares["host_restored"] <= 1, shares


def test_gpu_panels(live: Live, dashboards: dict[str, Any]) -> None:
    if live.gpu_skip:
        pytest.skip(f"GPU dashboard not proven live: {live.gpu_skip}")
    gpu = dashboards["helios-gpu.json"]
    gpus = label_values(live.prom, f'helios_gpu_up{{job="{JOB}", instance="{live.offload_instance}"}}',
                        "gpu", live.start, live.closed_at)
    assert gpus == ["0", "1"], live.tails()
    values = grafana_values(live.offload_instance, live.start, live.closed_at, gpu=gpus[0])
    empty = empty_targets(live, gpu, values, live.closed_at)
    assert empty == [], report(empty, live)
    ranks = run_target(live, next(t for t in targets(gpu) if t.panel == "Which GPU serves which rank"),
                       values, live.closed_at)
    assert [(r["metric"]["gpu"], r["metric"]["rank"]) for r in ranks] == [("0", "0")]


def test_annotations(live: Live, dashboards: dict[str, Any]) -> None:
    annotations = {a["name"]: a["expr"] for a in dashboards["helios-restore.json"]["annotations"]["list"]}
    values = grafana_values(live.restore_instance, live.start, live.closed_at)
    window = substitute(annotations["Restore window"], values)
    assert range_query(live.prom, window, live.start, live.window_at)
    assert instant(live.prom, window, live.closed_at) == []
    fresh = instant(live.prom, substitute(annotations["New generation"], values), live.closed_at)
    assert [r["metric"]["generation"] for r in fresh] not in ([], [live.incumbent])


def test_variables_have_values(live: Live, dashboards: dict[str, Any]) -> None:
    instances = {"helios-restore.json": live.restore_instance}
    for name, dashboard in dashboards.items():
        if name == "helios-gpu.json" and live.gpu_skip:
            continue
        values = {"cluster": EAST, "job": JOB, "instance": instances.get(name, live.offload_instance)}
        for variable in dashboard["templating"]["list"]:
            if variable["type"] != "query":
                continue
            selector = substitute(variable_query_expr(variable["query"]), values)
            found = label_values(live.prom, selector, variable["name"], live.start, live.closed_at)
            assert found, f"{name}: variable {variable['name']} has no value"


def test_clusters_with_the_same_instance_stay_apart(live: Live, dashboards: dict[str, Any]) -> None:
    """Sidecar A's instance exists in both clusters (east: the restore engine, west: the offload
    engine). Every panel, annotation and variable query for that instance answers (no
    many-to-many join error), every series it returns carries the cluster label, and choosing
    one cluster returns only that cluster's series."""
    seen: set[str] = set()
    checked = 0
    for dashboard in dashboards.values():
        for at in (live.window_at, live.closed_at):
            for cluster in (".*", EAST, WEST):
                values = grafana_values(live.restore_instance, live.start, at, cluster=cluster,
                                        generation=".*", gpu=".*")
                for target in targets(dashboard):
                    series = run_target(live, target, values, at)
                    clusters = {s["metric"].get("cluster") for s in series}
                    checked += 1
                    assert None not in clusters, f"{target.name}: an aggregation dropped the cluster"
                    if cluster != ".*":
                        assert clusters <= {cluster}, f"{target.name}: {clusters} for {cluster}"
                    seen |= clusters  # type: ignore[arg-type]
                for variable in dashboard["templating"]["list"]:
                    if variable["type"] == "query" and variable["name"] != "cluster":
                        selector = substitute(variable_query_expr(variable["query"]), values)
                        label_values(live.prom, selector, variable["name"], live.start, at)
        assert checked
    assert seen == {EAST, WEST}, "both clusters answer for the shared instance"
