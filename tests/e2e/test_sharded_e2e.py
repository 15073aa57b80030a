"""Sharded scraping and Prometheus agent mode into a central store whose rule engine runs the shipped
rules, with the shipped files of deploy/ha/: two vmagents in cluster mode (vmagent.flags,
vmagent-scrape.yml) split the sidecars between them, a Prometheus in agent mode
(prometheus-agent.yml, prometheus-agent.flags) scrapes another, all remote-write to one
VictoriaMetrics (victoria-metrics.flags), where vmalert (vmalert.flags) evaluates
alerts/helios-alerts.yaml and alerts/helios-recording.yaml and sends to the two-node Alertmanager
cluster of test_ha_e2e.py (tests/e2e/topology.py: deploy/ha/alertmanager.flags and the production
alertmanager.yml, receivers at a local webhook, timers divided by 12). The files are used as they
are, with host names, paths and the 15 s intervals replaced (1 s here); the test adds only listen
addresses, data paths and how often the agents re-read their target file and flush.

Each engine (one per vmagent, one behind the agent; run at once) plays a window that breaches its
restore bound and closes late, then one that closes in time (once vmalert saw it drained). The
bound is 50 s, not 10 s as in test_ha_e2e.py: vmalert reads a recorded series about 10 s after it
first writes it and the restore memory is three recorded steps deep, so it sees a new window open
up to about 30 s late (docs/scale.md). Every notification at the webhook is counted
(topology.episodes): each page and each resolve once, with the engine's own `instance`; the
remembered window start and deadlines vmalert recorded agree with the sidecar's own within the
rules' tolerance, and its whole restore memory with a single Prometheus's on the same sidecars.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from alerts.promql import SAME_TIME_TOLERANCE
from tests.e2e.procs import Stack, free_port, http_ok, need, query, wait_for
from tests.e2e.topology import (
    PAGE,
    TIMEOUT,
    AlertmanagerCluster,
    Incident,
    assert_late_window_paged_once,
    dump,
    flags,
    quiet,
    rules_dir,
    shipped,
    wait_delivery,
    write_targets,
)
from tests.process_guard import process_fixture
from tools.webhook import WebhookReceiver

pytestmark = pytest.mark.e2e

BOUND = 50
INTERVALS = {"scrape_interval: 15s": "scrape_interval: 1s"}
# Not in the shipped files: how often the agents re-read their target file (vmagent's default
# is 1 minute) and how soon they send what they scraped.
VMAGENT_TEST_FLAGS = ("-promscrape.fileSDCheckInterval=1s", "-remoteWrite.flushInterval=1s")


@dataclass
class Central:
    stack: Stack
    hook: WebhookReceiver
    vm: str
    vmagents: list[str]
    agent: str
    agent_targets: Path
    incidents: dict[str, Incident]
    prometheus: str  # one Prometheus scraping every sidecar with the same rules, to compare

    def targets(self, url: str) -> list[str]:
        """The instances a vmagent or the agent scrapes."""
        data = httpx.get(url + "/api/v1/targets", timeout=3).json()["data"]["activeTargets"]
        return sorted(t["labels"]["instance"] for t in data)


def _split(stack: Stack, vmagents: list[str], targets: Path) -> list[int]:
    """A port for each vmagent that it, and not the other, scrapes: the shard is a hash of the
    target's labels, so offer candidates and read which member took which."""
    candidates = sorted({free_port() for _ in range(8)})
    write_targets(targets, candidates)

    def owners() -> list[list[str]] | None:
        got = [sorted(t["labels"]["instance"] for t in httpx.get(
            u + "/api/v1/targets", timeout=3).json()["data"]["activeTargets"]) for u in vmagents]
        return got if sum(map(len, got)) == len(candidates) else None

    got = wait_for(owners, TIMEOUT, "the vmagents share the candidate targets")
    assert all(got), f"one vmagent took every candidate: {got}"
    assert not set(got[0]) & set(got[1]), got
    return [int(g[0].rsplit(":", 1)[1]) for g in got]


@process_fixture(scope="module")
def central(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Central]:
    tmp = tmp_path_factory.mktemp("sharded")
    stack = Stack(tmp)
    hook = WebhookReceiver().start()
    try:
        am = AlertmanagerCluster(stack, hook)
        am.start_all()
        vm_port, vmalert_port = free_port(), free_port()
        vm = f"http://127.0.0.1:{vm_port}"
        store = {"http://victoria-metrics:8428": vm}
        notifiers = {f"http://{k}": f"http://{v}" for k, v in am.hosts.items()}
        proc = stack.start("victoria-metrics", [
            need("victoria-metrics"),
            *flags("victoria-metrics.flags", {"-search.latencyOffset=15s": "-search.latencyOffset=1s"}),
            f"-storageDataPath={tmp / 'vm'}", f"-httpListenAddr=127.0.0.1:{vm_port}"])
        wait_for(lambda: http_ok(vm + "/health"), 60, "victoria-metrics ready", proc)
        etc = rules_dir(tmp)
        vmalert = f"http://127.0.0.1:{vmalert_port}"
        proc = stack.start("vmalert", [
            need("vmalert"),
            *flags("vmalert.flags", {"/etc/victoria-metrics/helios/": f"{etc}/", **store, **notifiers,
                                     "-evaluationInterval=15s": "-evaluationInterval=1s"}),
            "-remoteWrite.flushInterval=1s", f"-httpListenAddr=127.0.0.1:{vmalert_port}"])
        wait_for(lambda: http_ok(vmalert + "/health"), 60, "vmalert ready", proc)
        shards = etc / "sidecars.json"
        scrape = tmp / "vmagent-scrape.yml"
        scrape.write_text(shipped("vmagent-scrape.yml", {
            "/etc/victoria-metrics/helios/sidecars.json": str(shards), **INTERVALS}))
        vmagents = []
        for member in (0, 1):
            port = free_port()
            proc = stack.start(f"vmagent-{member}", [
                need("vmagent"),
                *flags("vmagent.flags", {
                    "/etc/victoria-metrics/vmagent-scrape.yml": str(scrape), **store,
                    "-promscrape.cluster.memberNum=0": f"-promscrape.cluster.memberNum={member}"}),
                *VMAGENT_TEST_FLAGS, f"-remoteWrite.tmpDataPath={tmp / f'vmagent-{member}'}",
                f"-httpListenAddr=127.0.0.1:{port}"])
            vmagents.append(f"http://127.0.0.1:{port}")
            wait_for(lambda u=vmagents[-1]: http_ok(u + "/health"), 60, "vmagent ready", proc)
        agent_dir = tmp / "agent"
        agent_dir.mkdir()
        agent_targets = agent_dir / "sidecars.json"
        write_targets(agent_targets, [])
        config = tmp / "prometheus-agent.yml"
        config.write_text(shipped("prometheus-agent.yml", {
            "/etc/prometheus/helios/sidecars.json": str(agent_targets), **store, **INTERVALS}))
        port = free_port()
        agent = f"http://127.0.0.1:{port}"
        proc = stack.start("prometheus-agent", [
            need("prometheus"), *flags("prometheus-agent.flags", {}), f"--config.file={config}",
            f"--storage.agent.path={tmp / 'agent-wal'}", f"--web.listen-address=127.0.0.1:{port}"])
        wait_for(lambda: http_ok(agent + "/-/ready"), 60, "prometheus agent ready", proc)

        ports = _split(stack, vmagents, shards)
        write_targets(shards, ports)
        incidents = {f"shard-{i}": Incident(stack, f"shard-{i}", port=p, bound=BOUND)
                     for i, p in enumerate(ports)}
        incidents["agent"] = Incident(stack, "agent", bound=BOUND)
        write_targets(agent_targets, [incidents["agent"].port])
        for inc in incidents.values():
            inc.start()
        # The reference: a single Prometheus on the same sidecars and rule files (no alerting).
        _, single = stack.prometheus([i.instance for i in incidents.values()],
                                     rule_files=[etc / "helios-alerts.yaml"])
        c = Central(stack, hook, vm, vmagents, agent, agent_targets, incidents, single)
        for inc in incidents.values():
            wait_for(lambda i=inc: query(vm, f'helios_restore_window_open{{instance="{i.instance}"}} == 0'),
                     TIMEOUT, f"{inc.key} reaches VictoriaMetrics")
        yield c
    finally:
        stack.stop_all()
        hook.stop()
        dump(hook, tmp / "webhook.jsonl")


def test_each_sidecar_is_scraped_by_one_agent_only(central: Central) -> None:
    inc = central.incidents
    assert central.targets(central.vmagents[0]) == [inc["shard-0"].instance]
    assert central.targets(central.vmagents[1]) == [inc["shard-1"].instance]
    assert central.targets(central.agent) == [inc["agent"].instance]


def _remembered(central: Central, inc: Incident) -> dict[str, float]:
    """The window's start and deadlines as vmalert's restore memory holds them."""
    out = {}
    for name, series, extra in (
            ("start", "helios:restore_window_start_timestamp_seconds:last_seen", ""),
            ("request_cutoff_deadline", "helios:restore_deadline_timestamp_seconds:last_seen",
             ',bound="request_cutoff"'),
            ("restore_deadline", "helios:restore_deadline_timestamp_seconds:last_seen",
             ',bound="restore"')):
        (got,) = query(central.vm, f'{series}{{instance="{inc.instance}"{extra}}}')
        out[name] = float(got["value"][1])
    return out


def _memory(url: str, inc: Incident) -> dict[str, float]:
    """Every series of the restore memory the alerts read (`last_seen`, and the recent part it
    is made of) of `inc`, by name and labels."""
    got = query(url, f'{{__name__=~"helios:.+:(last_seen|last6m)",instance="{inc.instance}"}}')
    return {json.dumps(sorted(r["metric"].items())): float(r["value"][1]) for r in got}


def _agrees_with_prometheus(central: Central, inc: Incident) -> None:
    """The memory vmalert recorded in VictoriaMetrics is the memory a single Prometheus recorded
    from the same sidecar: the same series, the same values within the rules' tolerance (the
    window is open and steady: nothing changes between the two reads)."""
    def same() -> list[str] | None:
        vm, prom = _memory(central.vm, inc), _memory(central.prometheus, inc)
        differ = [k for k in vm.keys() | prom.keys()
                  if k not in vm or k not in prom or abs(vm[k] - prom[k]) > SAME_TIME_TOLERANCE]
        return None if differ or not vm else sorted(vm)

    got = wait_for(same, TIMEOUT, f"{inc.key}: vmalert's memory equals Prometheus's")
    assert len(got) >= 8, got  # window open, start, two deadlines, in flight: recent and last_seen


def _story(central: Central, inc: Incident) -> str:
    """The late window, then one in time; returns what vmalert remembered against the sidecar."""
    start = inc.open_window()
    window = inc.restore()["window"]
    paged = wait_delivery(central.hook, inc, PAGE, "firing",
                          TIMEOUT + max(0.0, start + BOUND - time.time()))
    assert paged >= window["restore_deadline"]
    remembered = _remembered(central, inc)
    for name, value in remembered.items():
        assert abs(value - window[name]) <= SAME_TIME_TOLERANCE, (name, value, window[name])
    _agrees_with_prometheus(central, inc)
    inc.close_window("late")
    wait_delivery(central.hook, inc, PAGE, "resolved")
    # In time: vmalert's memory sees the window open and drained (existing series now: about a
    # second), and it closes well within its 50 s bound.
    sel = f'{{instance="{inc.instance}"}}'
    seen = (f"helios:restore_window_open:last_seen{sel} == 1",
            f"helios:restore_incumbent_inflight_requests:last_seen{sel} == 0")
    inc.in_time_window(lambda: all(query(central.vm, expr) for expr in seen))
    return f"{inc.key}: " + ", ".join(f"{k} {remembered[k] - window[k]:+.2e} s" for k in remembered)


def test_every_engine_pages_once_with_its_own_instance(central: Central) -> None:
    with ThreadPoolExecutor(len(central.incidents)) as pool:
        reports = list(pool.map(lambda i: _story(central, i), central.incidents.values()))
    quiet()
    for inc in central.incidents.values():
        assert_late_window_paged_once(central.hook, inc)
    assert not central.hook.bad_posts()
    print("\nremembered by vmalert less the sidecar's own:\n  " + "\n  ".join(reports))
