"""The shipped rules in a second rule engine: VictoriaMetrics' vmalert (Debian's victoria-metrics)
evaluating alerts/helios-alerts.yaml and alerts/helios-recording.yaml against VictoriaMetrics
scraping a real sidecar, beside a real Prometheus with the same rules scraping the same sidecar.
One restore goes wrong (two requests stuck through a 60 s drain, 40 s request cutoff, 50 s restore
bound, the engine back about 71 s after the drain began); both engines must fire the same restore alerts
and resolve the same ones; vmalert fires within FIRE_LAG after Prometheus and resolves within
RESOLVE_LAG of it.

vmalert writes its recording rules back to VictoriaMetrics (-remoteWrite.url), where the next
rules read them: the restore memory is three recorded steps deep. VictoriaMetrics hides the last
30 s of data from queries by default (-search.latencyOffset), which would add 30 s to every step;
it runs here with 1 s, as docs/scale.md says to run it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.e2e.procs import ROOT, Stack, free_port, http_ok, need, query, wait_for

pytestmark = pytest.mark.e2e

JOB = "helios-exporter"
RULE_FILES = [ROOT / "alerts" / "helios-alerts.yaml", ROOT / "alerts" / "helios-recording.yaml"]
AM_DIR = ROOT / "deploy" / "alertmanager"
RESTORE_ALERTS = {"HeliosRestoreWindowOpen", "HeliosRequestCutoffBreached", "HeliosRestoreBoundAtRisk",
                  "HeliosRestoreBoundBreached", "HeliosRestoreCheckFailed", "HeliosRestoreWindowClosed"}
# How much later vmalert may see an alert fire than Prometheus (and at most 2 s earlier: the two
# scrape and evaluate on clocks of their own). A window's restore series are new series, and so
# are the three recorded steps of the restore memory made from them; vmalert's rules read a new
# recorded series about 10 s after it first writes it (measured with victoria-metrics 1.79), so
# the memory's alerts fire up to about 30 s after Prometheus's when a window opens.
FIRE_LAG = 40.0
# Resolving is a change of series that exist already: 0.3 to 4.5 s on a quiet machine, once 16 s
# under the whole suite's load on 2 cores. VictoriaMetrics's default -search.latencyOffset (30 s)
# alone would put every resolve past this bound.
RESOLVE_LAG = 25.0
# The outage starts 30 s after the simulator: both stores must have scraped the sidecar before the
# window opens (a busy machine once took VictoriaMetrics over 15 s).
SERVING = ("--outage-after", "30", "--rate", "2")
# Slower than test_alerts_e2e.py's late case, so that every restore alert outlasts vmalert's
# lag at a window's start (FIRE_LAG): two requests stuck through a 60 s drain, the request cutoff
# at 40 s (while they are in flight), the restore bound at 50 s, the engine back about 71 s after
# the drain started.
LATE_ENGINE = ("--drain-seconds", "60", "--closed-seconds", "1", "--down-seconds", "10",
               "--outage-stuck-requests", "2")
LATE_SIDECAR = ("--poll-interval", "0.3", "--down-grace", "1", "--request-cutoff", "40",
                "--restore-bound", "50")

@dataclass
class Timeline:
    """When each alert (by name and its distinguishing labels) was first seen firing, and when it
    was first seen no longer firing after that."""

    first: dict[str, float] = field(default_factory=dict)
    resolved: dict[str, float] = field(default_factory=dict)

    def see(self, alerts: list[dict[str, Any]], now: float) -> None:
        firing = set()
        for a in alerts:
            labels = a["labels"]
            if labels.get("alertname") not in RESTORE_ALERTS or a.get("state") != "firing":
                continue
            firing.add(labels["alertname"] + "".join(
                f",{k}={labels[k]}" for k in ("bound", "check", "outcome") if k in labels))
        for key in firing:
            self.first.setdefault(key, now)
            self.resolved.pop(key, None)  # fired again: not resolved after all
        for key in set(self.first) - firing:
            self.resolved.setdefault(key, now)


@dataclass
class Engines:
    prometheus: str
    vmalert: str
    sidecar: str


def _vm_scrape_config(target: str) -> str:
    return (f"global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: {JOB}\n"
            f"    static_configs:\n      - targets: ['{target}']\n")


@pytest.fixture
def engines(tmp_path: Any) -> Iterator[Engines]:
    for binary in ("victoria-metrics", "vmalert"):
        if shutil.which(binary) is None:
            need(binary)  # fails: scripts/bootstrap installs Debian's victoria-metrics
    stack = Stack(tmp_path)
    try:
        _, am = stack.alertmanager((AM_DIR / "alertmanager-test.yml").read_text()
                                   .replace("__WEBHOOK_PORT__", str(free_port()))
                                   .replace("__TEMPLATE_DIR__", str(AM_DIR)))
        port = free_port()
        target = f"127.0.0.1:{port}"
        _, prom = stack.prometheus([target], rule_files=RULE_FILES, alertmanager=am.removeprefix("http://"))
        vm_port, vmalert_port = free_port(), free_port()
        (tmp_path / "vm-scrape.yml").write_text(_vm_scrape_config(target))
        vm = f"http://127.0.0.1:{vm_port}"
        vm_proc = stack.start("victoria-metrics", [
            need("victoria-metrics"), f"-storageDataPath={tmp_path / 'vm'}",
            f"-httpListenAddr=127.0.0.1:{vm_port}", f"-promscrape.config={tmp_path / 'vm-scrape.yml'}",
            "-search.latencyOffset=1s", "-search.disableCache", "-retentionPeriod=1d",
        ])
        wait_for(lambda: http_ok(vm + "/health"), 60, "victoria-metrics ready", vm_proc)
        vmalert = f"http://127.0.0.1:{vmalert_port}"
        vmalert_proc = stack.start("vmalert", [
            need("vmalert"), *(f"-rule={r}" for r in RULE_FILES), f"-datasource.url={vm}",
            f"-remoteWrite.url={vm}", "-remoteWrite.flushInterval=1s", f"-notifier.url={am}",
            "-evaluationInterval=1s", f"-httpListenAddr=127.0.0.1:{vmalert_port}",
        ])
        wait_for(lambda: http_ok(vmalert + "/health"), 60, "vmalert ready", vmalert_proc)
        # The scenario's clock starts with the simulator.
        _, engine = stack.simulator("outage", *SERVING, *LATE_ENGINE, "--seed", "21")
        _, sidecar = stack.sidecar(engine, *LATE_SIDECAR, port=port)
        wait_for(lambda: query(prom, f'helios_restore_window_open{{job="{JOB}"}} == 0'), 15,
                 "Prometheus scrapes the sidecar")
        wait_for(lambda: query(vm, f'helios_restore_window_open{{job="{JOB}"}} == 0'), 25,
                 "VictoriaMetrics scrapes the sidecar")
        yield Engines(prom, vmalert, sidecar)
    finally:
        stack.stop_all()


def _alerts(url: str) -> list[dict[str, Any]]:
    resp = httpx.get(url + "/api/v1/alerts", timeout=5)
    resp.raise_for_status()
    alerts: list[dict[str, Any]] = resp.json()["data"]["alerts"] or []  # vmalert: null for none
    return alerts


def test_vmalert_fires_and_resolves_the_restore_alerts_as_prometheus_does(engines: Engines) -> None:
    prom, vm = Timeline(), Timeline()
    start = time.monotonic()
    closed_at = None
    want = {"HeliosRestoreWindowOpen", "HeliosRequestCutoffBreached",
            "HeliosRestoreBoundAtRisk,bound=restore", "HeliosRestoreBoundBreached,bound=restore",
            "HeliosRestoreCheckFailed,check=drained_admission", "HeliosRestoreWindowClosed,outcome=late"}
    # The alerts the close resolves; the failed check and the notice keep firing (5 minutes, a
    # later window).
    resolves = {"HeliosRestoreWindowOpen", "HeliosRequestCutoffBreached",
                "HeliosRestoreBoundAtRisk,bound=restore", "HeliosRestoreBoundBreached,bound=restore"}
    # The outage starts 30 s after the simulator and the window closes about 71 s later; then
    # watch until vmalert has fired everything and both have resolved what the close ends.
    while time.monotonic() - start < 240:
        now = time.monotonic()
        prom.see(_alerts(engines.prometheus), now)
        vm.see(_alerts(engines.vmalert), now)
        if closed_at is None and httpx.get(engines.sidecar + "/status", timeout=3).json()[
                "restore"]["last_window"]:
            closed_at = now
        if closed_at is not None and (
                (set(vm.first) >= want and set(vm.resolved) >= resolves
                 and set(prom.resolved) >= resolves and now - closed_at > RESOLVE_LAG)
                or now - closed_at > FIRE_LAG + RESOLVE_LAG + 10):
            break
        time.sleep(0.25)
    assert closed_at is not None, "the window never closed"
    assert set(prom.first) == want, prom.first
    assert set(vm.first) == want, vm.first
    report = []
    for key in sorted(want):
        fired = vm.first[key] - prom.first[key]
        report.append(f"{key}: fired {fired:+.1f} s")
        assert -2 <= fired <= FIRE_LAG, report
    assert set(prom.resolved) == resolves, prom.resolved
    assert set(vm.resolved) == resolves, vm.resolved
    for key in sorted(resolves):
        ended = vm.resolved[key] - prom.resolved[key]
        report.append(f"{key}: resolved {ended:+.1f} s")
        assert -2 <= ended <= RESOLVE_LAG, report
    print("\nvmalert against Prometheus:\n  " + "\n  ".join(report))
