"""An HA pair of Prometheus servers and a two-node Alertmanager cluster, with the shipped files:
deploy/ha/prometheus.yml and prometheus.flags for both replicas (HELIOS_REPLICA=a, b; the
`replica` label dropped from alerts), deploy/ha/alertmanager.flags for both Alertmanagers, loaded
with the production deploy/alertmanager/alertmanager.yml (receivers at a local webhook, every
timer divided by 12). The files are used as they are; tests/e2e/topology.py replaces host names,
paths and the 15 s intervals (1 s here), nothing else.

Each engine plays a window that closes in time, then one that breaches its restore bound (10 s)
and closes late (each stopped once both replicas saw it drained); every notification that reaches
the webhook is counted (topology.episodes): each page and each resolve once, with the engine's
`instance`, no notification twice, none re-sent as new:

- through a replica SIGKILLed inside the open window and restarted on its data directory;
- through the Alertmanager that would notify first SIGKILLed while the page waits out its
  group_wait, and restarted on its storage before the resolve.

"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.procs import Proc, Stack, free_port, http_ok, need, query, wait_for
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


@dataclass
class Replica:
    name: str
    port: int
    args: list[str]
    env: dict[str, str]
    proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Pair:
    stack: Stack
    hook: WebhookReceiver
    am: AlertmanagerCluster
    replicas: list[Replica]
    targets: Path
    ports: list[int]

    def start(self, r: Replica) -> None:
        r.proc = self.stack.start(r.name, r.args, env=r.env)
        wait_for(lambda: http_ok(r.url + "/-/ready"), 60, f"{r.name} ready", r.proc)

    def add(self, inc: Incident) -> Incident:
        """Start the incident and put its sidecar in both replicas' file_sd file."""
        self.ports.append(inc.port)
        write_targets(self.targets, self.ports)
        inc.start()
        scraped = f'helios_restore_window_open{{instance="{inc.instance}"}} == 0'
        for r in self.replicas:
            wait_for(lambda r=r: query(r.url, scraped), TIMEOUT, f"{r.name} scrapes {inc.key}")
        return inc

    def seen_open(self, inc: Incident) -> bool:
        """Both replicas remember the window open."""
        remembered = f'helios:restore_window_open:last_seen{{instance="{inc.instance}"}} == 1'
        return all(query(r.url, remembered) for r in self.replicas)

    def seen_drained(self, inc: Incident) -> bool:
        """Both replicas remember the window open with no incumbent request in flight."""
        drained = (f'helios:restore_incumbent_inflight_requests:last_seen{{instance="{inc.instance}"}}'
                   " == 0")
        return self.seen_open(inc) and all(query(r.url, drained) for r in self.replicas)

    def firing(self, r: Replica, alertname: str, instance: str) -> list[dict[str, object]]:
        alerts = httpx.get(r.url + "/api/v1/alerts", timeout=3).json()["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == alertname
                and a["labels"].get("instance") == instance and a["state"] == "firing"]


@process_fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    tmp = tmp_path_factory.mktemp("ha")
    stack = Stack(tmp)
    hook = WebhookReceiver().start()
    try:
        am = AlertmanagerCluster(stack, hook)
        am.start_all()
        etc = rules_dir(tmp)
        targets = etc / "sidecars.json"
        write_targets(targets, [])
        config = tmp / "prometheus.yml"
        config.write_text(shipped("prometheus.yml", {
            "/etc/prometheus/helios/": f"{etc}/", **am.hosts,
            "scrape_interval: 15s": "scrape_interval: 1s",
            "evaluation_interval: 15s": "evaluation_interval: 1s"}))
        replicas = []
        for name in ("a", "b"):
            port = free_port()
            replicas.append(Replica(f"prometheus-{name}", port, [
                need("prometheus"), *flags("prometheus.flags", {}), f"--config.file={config}",
                f"--storage.tsdb.path={tmp / f'prom-{name}'}",
                f"--web.listen-address=127.0.0.1:{port}"], {"HELIOS_REPLICA": name}))
        p = Pair(stack, hook, am, replicas, targets, [])
        for r in replicas:
            p.start(r)
        yield p
    finally:
        stack.stop_all()
        hook.stop()
        dump(hook, tmp / "webhook.jsonl")


def test_the_replicas_are_configured_as_shipped(pair: Pair) -> None:
    for r in pair.replicas:
        cfg = httpx.get(r.url + "/api/v1/status/config", timeout=3).json()["data"]["yaml"]
        assert f"replica: {r.name[-1]}" in cfg  # the external label, from the environment
        got = httpx.get(r.url + "/api/v1/status/flags", timeout=3).json()["data"]
        assert got["rules.alert.for-grace-period"] == "15s", got
        assert got["rules.alert.for-outage-tolerance"] == "3h", got


def test_a_replica_killed_in_an_open_window_loses_and_repeats_no_page(pair: Pair) -> None:
    inc = pair.add(Incident(pair.stack, "replica-kill"))
    inc.in_time_window(lambda: pair.seen_drained(inc))
    # Killed while the window is open, before its restore deadline (start + 10 s), once both
    # replicas saw the engine drained. (A replica killed before it saw a change evaluates its
    # pre-kill values after the restart until its first scrape: docs/scale.md.)
    start = inc.open_window(lambda: pair.seen_drained(inc))
    b = pair.replicas[1]
    assert b.proc is not None
    b.proc.kill()
    paged = wait_delivery(pair.hook, inc, PAGE, "firing", TIMEOUT + max(0.0, start + 10 - time.time()))
    assert paged >= start + 10
    pair.start(b)  # on its data directory: it remembers the window from before the kill
    wait_for(lambda: pair.firing(b, PAGE, inc.instance), TIMEOUT, "replica b fires the page again")
    quiet()  # b's copy reaches the Alertmanagers: the same alert, not a new page
    inc.close_window("late")
    wait_delivery(pair.hook, inc, PAGE, "resolved")
    quiet()
    assert_late_window_paged_once(pair.hook, inc)
    assert not pair.hook.bad_posts()


def test_an_alertmanager_killed_while_the_page_waits_sends_it_once(pair: Pair) -> None:
    inc = pair.add(Incident(pair.stack, "am-kill"))
    inc.in_time_window(lambda: pair.seen_drained(inc))
    first = pair.am.first()
    start = inc.open_window(lambda: pair.seen_drained(inc))
    # The page reaches both Alertmanagers at once; the first would send it after its 1 s
    # group_wait. Kill it as soon as it holds the page.
    wait_for(lambda: pair.am.alerts(first, PAGE) and [
        a for a in pair.am.alerts(first, PAGE) if a["labels"].get("instance") == inc.instance],
        TIMEOUT + max(0.0, start + 10 - time.time()), "the page reaches the first Alertmanager",
        interval=0.02)
    pair.am.kill(first)
    killed = time.time()
    paged = wait_delivery(pair.hook, inc, PAGE, "firing")
    assert paged > killed, "the first Alertmanager sent the page before it was killed"
    # The other one sent it, after its peer timeout: about 15 s later.
    print(f"\npage delivered {paged - killed:.1f} s after the first Alertmanager was killed")
    pair.am.start(first)  # on its storage; rejoins the cluster
    wait_for(lambda: all(len(pair.am.peers(n)) == 2 for n in pair.am.nodes), 60, "cluster rejoined")
    quiet()
    inc.close_window("late")
    wait_delivery(pair.hook, inc, PAGE, "resolved")
    quiet()  # a resolve sent twice would come a peer timeout (1.25 s here) after the first
    assert_late_window_paged_once(pair.hook, inc)
