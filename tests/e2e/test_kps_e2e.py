"""The Helios alerting inside kube-prometheus-stack's defaults, through the real chain: a real
Prometheus evaluating the SHIPPED alerts/helios-alerts.yaml and deploy/kube-prometheus-stack's
rule beside kps's own general and kubernetes-apps rules (tests/fixtures/kube-prometheus-stack),
and a real Alertmanager (Debian's 0.25) loaded with deploy/kube-prometheus-stack/values.yaml's
`alertmanager.config`: kps's default configuration with the Helios fragment merged in.

Changed for the test only: every receiver, kps's 'null' included, posts to a webhook here
(`/<receiver>` the JSON, `/<receiver>/text` the Slack text rendered by helios.tmpl); the
Alertmanager timers are 1 s; and kps's `for:` (TargetDown 10m, KubePodNotReady 15m) are 2 s.
kps's inhibitions, routes and rule expressions are as shipped.

The scraped targets are scripted expositions (tools/harness.py's StubEngine serving the /metrics
text the test sets, or 503 while `down`): the sidecar of a StatefulSet
pod `helios/engine-0` as the shipped PodMonitor labels it (instance `<namespace>/<pod>`), and
kube-state-metrics' view of that pod (running, not ready).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.e2e.procs import ROOT, Stack
from tests.process_guard import process_fixture
from tools.harness import StubEngine
from tools.webhook import WebhookReceiver

pytestmark = pytest.mark.e2e

JOB = "helios-exporter"
NAMESPACE = "helios"
INSTANCE = "helios/engine-0"
TARGET = f"{JOB}/{INSTANCE}"
KPS = ROOT / "deploy" / "kube-prometheus-stack"
KPS_RULES = ROOT / "tests" / "fixtures" / "kube-prometheus-stack"
# The restore deadline, seconds after the window opened: time for Prometheus to start and for
# the outage phase (TargetDown and KubePodNotReady held back) to be checked before it pages.
DEADLINE = 45.0


def _compress(node: Any) -> Any:
    """Alertmanager timers of 1 s (repeat 1 h), everything else unchanged."""
    if isinstance(node, dict):
        out = {k: _compress(v) for k, v in node.items()}
        for key in ("group_wait", "group_interval"):
            if key in out:
                out[key] = "1s"
        if "repeat_interval" in out:
            out["repeat_interval"] = "1h"
        return out
    if isinstance(node, list):
        return [_compress(v) for v in node]
    return node


def kps_test_config(hook_port: int, template_dir: Path) -> str:
    """values.yaml's alertmanager.config with every receiver on the local webhook."""
    values = yaml.safe_load((KPS / "values.yaml").read_text(encoding="utf-8"))
    config = _compress(values["alertmanager"]["config"])
    for name, text in values["alertmanager"]["templateFiles"].items():
        (template_dir / name).write_text(text, encoding="utf-8")
    assert config["templates"] == ["/etc/alertmanager/config/*.tmpl"]
    config["templates"] = [str(template_dir / "*.tmpl")]
    base = f"http://127.0.0.1:{hook_port}"
    for receiver in config["receivers"]:
        name = receiver["name"]
        slack = receiver.get("slack_configs", [])
        receiver["webhook_configs"] = [{"url": f"{base}/{name}", "send_resolved": True}]
        for text in slack:
            text["api_url"] = f"{base}/{name}/text"
    return yaml.safe_dump(config, sort_keys=False)


def compressed_rules(tmp: Path) -> list[Path]:
    """kps's rule files with every `for:` at 2 s."""
    out = []
    for name in ("general.rules.yaml", "kubernetes-apps.rules.yaml"):
        doc = yaml.safe_load((KPS_RULES / name).read_text(encoding="utf-8"))
        for group in doc["groups"]:
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = "2s"
        path = tmp / name
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        out.append(path)
    return out


def window_open(start: float) -> str:
    return (f"helios_restore_window_open 1\n"
            f"helios_restore_window_start_timestamp_seconds {start}\n"
            f'helios_restore_deadline_timestamp_seconds{{bound="request_cutoff"}} {start + DEADLINE - 5}\n'
            f'helios_restore_deadline_timestamp_seconds{{bound="restore"}} {start + DEADLINE}\n'
            "helios_restore_incumbent_inflight_requests 0\n")


def window_closed_late(start: float, end: float) -> str:
    outcomes = "".join(f'helios_restore_last_window_outcome{{outcome="{o}"}} {int(o == "late")}\n'
                       for o in ("in_time", "late", "aborted", "unobserved"))
    return ("helios_restore_window_open 0\n"
            f"helios_restore_last_window_start_timestamp_seconds {start}\n"
            f"helios_restore_last_window_end_timestamp_seconds {end}\n"
            f"{outcomes}"
            "helios_restore_last_window_lost_requests 0\n"
            "helios_restore_last_window_restored 1\n"
            'helios_restore_check_ok{check="drained_admission"} 1\n'
            'helios_restore_check_ok{check="container"} 1\n')


POD_NOT_READY = (
    'kube_pod_status_phase{namespace="helios",pod="engine-0",phase="Running"} 1\n'
    'kube_pod_status_ready{namespace="helios",pod="engine-0",condition="true"} 0\n'
    'kube_pod_owner{namespace="helios",pod="engine-0",owner_kind="StatefulSet"} 1\n'
)

POD_READY = POD_NOT_READY.replace('condition="true"} 0', 'condition="true"} 1')


@dataclass
class Chain:
    sidecar: StubEngine
    ksm: StubEngine
    hook: WebhookReceiver
    alertmanager: str
    start: float  # the scripted window's start


def _scrape_configs(sidecar: StubEngine, ksm: StubEngine) -> str:
    return (
        "scrape_configs:\n"
        f"  - job_name: {JOB}\n"
        "    static_configs:\n"
        f"      - targets: ['{sidecar.target}']\n"
        f"        labels: {{instance: '{INSTANCE}', namespace: {NAMESPACE}}}\n"
        "  - job_name: kube-state-metrics\n"
        "    honor_labels: true\n"
        "    static_configs:\n"
        f"      - targets: ['{ksm.target}']\n"
    )


@process_fixture
def chain(tmp_path: Path) -> Iterator[Chain]:
    stack = Stack(tmp_path)
    templates = tmp_path / "templates"
    templates.mkdir()
    with StubEngine() as sidecar, StubEngine() as ksm, WebhookReceiver() as hook:
        try:
            _, am = stack.alertmanager(kps_test_config(hook.port, templates))
            start = time.time()
            sidecar.metrics = window_open(start)
            ksm.metrics = POD_NOT_READY
            rules = [ROOT / "alerts" / "helios-alerts.yaml", KPS / "helios-kps.rules.yaml",
                     *compressed_rules(tmp_path)]
            stack.prometheus([], rule_files=rules, alertmanager=am.removeprefix("http://"),
                             scrape_configs=_scrape_configs(sidecar, ksm))
            yield Chain(sidecar, ksm, hook, am, start)
        finally:
            stack.stop_all()


def am_alerts(am: str, name: str) -> list[dict[str, Any]]:
    resp = httpx.get(f"{am}/api/v2/alerts", params={"filter": f'alertname="{name}"'}, timeout=5)
    resp.raise_for_status()
    found: list[dict[str, Any]] = resp.json()
    return found


def texts(hook: WebhookReceiver, receiver: str) -> list[str]:
    return [p.body["attachments"][0]["text"] for p in hook.posts() if p.path == f"/{receiver}/text"]


def delivered(hook: WebhookReceiver, name: str) -> list[str]:
    return [d.post.receiver for d in hook.deliveries(name)]


def test_under_kps_defaults_the_outage_is_held_back_and_the_resolve_carries_its_notice(
    chain: Chain,
) -> None:
    hook, am = chain.hook, chain.alertmanager
    hook.wait_for(lambda: am_alerts(am, "HeliosRestoreWindowOpen"), 30, "the window open in AM")

    # The outage: the sidecar's pod is not ready and cannot be scraped.
    chain.sidecar.down = True
    for name, source in (("TargetDown", "HeliosRestoreWindowOpen"),
                         ("KubePodNotReady", "HeliosRestoreWindowPodInhibitor")):
        (alert,) = hook.wait_for(lambda n=name: am_alerts(am, n), 30, f"{name} in Alertmanager")
        assert alert["labels"]["namespace"] == NAMESPACE
        assert alert["status"]["state"] == "suppressed", alert["status"]
        (by,) = alert["status"]["inhibitedBy"]
        (src,) = am_alerts(am, source)
        assert by == src["fingerprint"], (name, alert["status"], src["labels"])

    # The breach pages from Prometheus's memory while the sidecar is down.
    breach = hook.wait_for(lambda: hook.deliveries("HeliosRestoreBoundBreached", status="firing"),
                           DEADLINE + 30, "the breach page")[0]
    assert breach.post.receiver == "helios-page"
    assert breach.labels["namespace"] == NAMESPACE and breach.labels["instance"] == INSTANCE
    page = hook.wait_for(lambda: [t for t in texts(hook, "helios-page")
                                  if f"Restore bound breached on {TARGET}" in t],
                         20, "the breach page's text")[0]
    assert page.lstrip().startswith("FIRING since"), page
    assert "Sidecar: unreachable" in page, page
    # The at-risk warning was a ticket, before the breach took over.
    ticket = hook.wait_for(lambda: texts(hook, "helios-ticket"), 10, "the at-risk ticket")[0]
    assert f"Restore of {TARGET} at risk" in ticket, ticket
    # Held back all along: nothing of the planned outage reached any receiver.
    for name in ("TargetDown", "KubePodNotReady", "HeliosExporterDown"):
        assert delivered(hook, name) == [], (name, hook.summary())

    # The sidecar is back: the window closed late, every check passing.
    end = time.time()
    chain.sidecar.metrics = window_closed_late(chain.start, end)
    chain.sidecar.down = False
    chain.ksm.metrics = POD_READY
    resolved = hook.wait_for(
        lambda: hook.deliveries("HeliosRestoreBoundBreached", status="resolved"), 30,
        "the breach resolved")[0]
    got = {(a["labels"]["alertname"], a["status"]) for a in resolved.post.body["alerts"]}
    assert got == {("HeliosRestoreBoundBreached", "resolved"),
                   ("HeliosRestoreWindowClosed", "firing")}, got
    # kps's InfoInhibitor does not mute the notice (it mutes severity info; with info, the notice
    # alone in the namespace set it off and was muted within seconds), so a later flush (with
    # production timers, the first one) still carries it. InfoInhibitor itself may fire for an
    # evaluation or two while the window's info alerts outlive the breach.
    watch_until = time.monotonic() + 8
    while time.monotonic() < watch_until:
        (notice,) = am_alerts(am, "HeliosRestoreWindowClosed")
        assert notice["status"]["state"] == "active", notice["status"]
        time.sleep(0.5)
    text = hook.wait_for(lambda: [t for t in texts(hook, "helios-page") if "RESOLVED at" in t],
                         20, "the resolve's text")[0]
    stamp = datetime.fromtimestamp(end, UTC).strftime("%Y-%m-%d %H:%M")
    assert re.search(r"RESOLVED at [0-9: -]+UTC: HeliosRestoreBoundBreached\.\n"
                     rf"Restore window on {re.escape(TARGET)} closed late at {stamp}", text), text
    assert "NOTICE: Restore window on" in text and "still open" not in text, text

    # Control: with no window open, the same outage reaches kps's receiver at once.
    chain.sidecar.down = True
    chain.ksm.metrics = POD_NOT_READY
    for name in ("TargetDown", "KubePodNotReady"):
        hook.wait_for(lambda n=name: hook.deliveries(n, status="firing", receiver="null"), 30,
                      f"{name} delivered without a window")
    assert not hook.bad_posts()


def _post(am: str, alerts: list[dict[str, Any]]) -> None:
    httpx.post(f"{am}/api/v2/alerts", json=alerts, timeout=5).raise_for_status()


def _alert(name: str, severity: str, summary: str, **labels: str) -> dict[str, Any]:
    return {
        "labels": {"alertname": name, "severity": severity, "namespace": NAMESPACE, **labels},
        "annotations": {"summary": summary, "description": f"{summary} (firing description)",
                        "runbook_url": f"https://runbooks.example/{name}.md"},
    }


def test_under_kps_defaults_a_forgotten_window_resolves_with_its_notice(tmp_path: Path) -> None:
    """The dead-sidecar sequence as Prometheus sends it (three hours compressed to seconds, so
    posted to Alertmanager; the rules' side is in alerts/tests/restore_outage.yaml and
    tests/deploy/kps/coexistence.yaml): the breach pages while the window is remembered open,
    TargetDown is held back; when the memory runs out the breach resolves with
    HeliosRestoreWindowForgotten beside it, and TargetDown, no longer explained, notifies."""
    stack = Stack(tmp_path)
    target = {"job": JOB, "instance": INSTANCE}
    opened = _alert("HeliosRestoreWindowOpen", "info", f"Restore window open on {TARGET}", **target)
    breach = _alert("HeliosRestoreBoundBreached", "critical", f"Restore bound breached on {TARGET}",
                    bound="restore", **target)
    down = _alert("TargetDown", "warning", "One or more targets are unreachable.", job=JOB)
    info_inhibitor = _alert("InfoInhibitor", "none", "Info-level alert inhibition.")
    forgotten = _alert("HeliosRestoreWindowForgotten", "notice",
                       f"Prometheus no longer remembers the open restore window on {TARGET}",
                       **target)
    with WebhookReceiver() as hook:
        try:
            templates = tmp_path / "templates"
            templates.mkdir()
            _, am = stack.alertmanager(kps_test_config(hook.port, templates))
            # kps's InfoInhibitor too, which mutes the window's info alert: a muted alert still
            # inhibits (Alertmanager keeps every firing alert as an inhibition source).
            _post(am, [opened, breach, down, info_inhibitor])
            hook.wait_for(lambda: hook.deliveries("HeliosRestoreBoundBreached", status="firing",
                                                  receiver="helios-page"), 20, "the breach page")
            (muted,) = am_alerts(am, "HeliosRestoreWindowOpen")
            assert muted["status"]["state"] == "suppressed", muted["status"]
            (held,) = am_alerts(am, "TargetDown")
            assert held["status"]["inhibitedBy"] == [muted["fingerprint"]], held["status"]
            now = time.time()
            _post(am, [_ended(opened, now), _ended(breach, now), _ended(info_inhibitor, now),
                       forgotten, down])
            resolved = hook.wait_for(
                lambda: hook.deliveries("HeliosRestoreBoundBreached", status="resolved"), 20,
                "the breach resolved")[0]
            assert resolved.post.receiver == "helios-page"
            got = {(a["labels"]["alertname"], a["status"]) for a in resolved.post.body["alerts"]}
            assert got == {("HeliosRestoreBoundBreached", "resolved"),
                           ("HeliosRestoreWindowForgotten", "firing")}, got
            text = hook.wait_for(lambda: [t for t in texts(hook, "helios-page") if "RESOLVED at" in t],
                                 20, "the resolve's text")[0]
            assert (f"HeliosRestoreBoundBreached.\nPrometheus no longer remembers the open restore "
                    f"window on {TARGET}: Prometheus's memory of the window ran out while the "
                    "sidecar was unreachable. This does not mean the window closed.") in text, text
            hook.wait_for(lambda: hook.deliveries("TargetDown", status="firing", receiver="null"),
                          20, "TargetDown once no window explains it")
            assert not hook.bad_posts()
        finally:
            stack.stop_all()


def _ended(alert: dict[str, Any], at: float) -> dict[str, Any]:
    """The same alert, resolved at `at`."""
    return {**alert, "endsAt": datetime.fromtimestamp(at, UTC).isoformat()}
