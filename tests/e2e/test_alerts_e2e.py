"""The restore alerts end to end on 127.0.0.1: simulated engine (outage scenario) -> sidecar ->
a real Prometheus with the SHIPPED rule files (alerts/helios-alerts.yaml,
alerts/helios-recording.yaml; 1 s scrape and evaluation) -> a real Alertmanager with
deploy/alertmanager/alertmanager-test.yml -> a webhook receiver in this process.

Both cases run at once (one module fixture), as two engine + sidecar pairs scraped by the same
Prometheus as two targets; restore pages are grouped per target (`cluster, job, instance`),
other alerts by `alertname, cluster, job, instance`, so each case only looks at its own
`instance`:

- late: 2 requests stay in flight through the drain (`--outage-stuck-requests 2`), the request
  cutoff is 1 s and the restore bound 4 s, the engine comes back about 13 s after the drain:
  `HeliosRequestCutoffBreached` and `HeliosRestoreBoundBreached` page, then resolve once the
  window closes, in the same notification as the notice `HeliosRestoreWindowClosed{outcome=
  "late"}` and `HeliosRestoreCheckFailed{check="drained_admission"}`; the text rendered by
  deploy/alertmanager/helios.tmpl says the window closed late.
- in time: a clean drain, restored about 6 s after the drain with a 1200 s restore bound
  (over the 15 min at-risk margin, see below): only the info alert `HeliosRestoreWindowOpen`
  reaches the webhook (`helios-null`), none of the restore alerts and no notice.

Sidecar metrics these assertions need (the sidecar side of the interface's restore semantics):
the cutoff page reads `helios_restore_incumbent_inflight_requests`; the late-close notice reads
`helios_restore_last_window_end_timestamp_seconds`, `helios_restore_last_window_start_timestamp_
seconds` and `helios_restore_last_window_outcome`. A sidecar without them fails
`test_breached_bounds_page_and_resolve_after_the_restore` at the cutoff page (the first) or at
the notice.

Why the in-time case has a 1200 s bound: `HeliosRestoreBoundAtRisk` fires while the restore
deadline is at most 15 min away, which any compressed bound under 900 s is from the moment the
window opens. A run with, say, `--restore-bound 40` therefore raises a (correct) AtRisk ticket.

Alertmanager timers of alertmanager-test.yml: group_wait 1s and group_interval 1s (firing and
resolved notifications go out within about a second), repeat_interval 1h (no repeats during
the test). `resolve_timeout: 1m` does not delay anything here: Prometheus sends every alert with
an explicit endsAt, and a resolved one with endsAt = the resolution time.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.procs import ROOT, Proc, Stack, free_port, http_ok, query, wait_for
from tests.process_guard import process_fixture
from tools.webhook import Delivery, WebhookReceiver

pytestmark = pytest.mark.e2e

JOB = "helios-exporter"
RULE_FILES = [ROOT / "alerts" / "helios-alerts.yaml", ROOT / "alerts" / "helios-recording.yaml"]
AM_DIR = ROOT / "deploy" / "alertmanager"
AM_TEMPLATE = AM_DIR / "alertmanager-test.yml"
RESTORE_ALERTS = ("HeliosRequestCutoffBreached", "HeliosRestoreBoundBreached",
                  "HeliosRestoreBoundAtRisk", "HeliosRestoreCheckFailed")

# Serving 8 s (time for both sidecars to start on a busy machine), then the outage.
SERVING = ("--outage-after", "8", "--rate", "2")
SIDECAR = ("--poll-interval", "0.3", "--down-grace", "1")
# late: draining 2 s -> closed 1 s -> down 10 s -> restored 13 s after the drain; deadlines at
# +1 s (cutoff) and +4 s (restore), so both alerts have about 9 s to page before the restore.
LATE_ENGINE = ("--drain-seconds", "2", "--closed-seconds", "1", "--down-seconds", "10",
               "--outage-stuck-requests", "2")
LATE_SIDECAR = ("--request-cutoff", "1", "--restore-bound", "4")
# in time: draining 2 s -> closed 1 s -> down 3 s -> restored 6 s after the drain.
IN_TIME_ENGINE = ("--drain-seconds", "2", "--closed-seconds", "1", "--down-seconds", "3")
IN_TIME_SIDECAR = ("--request-cutoff", "20", "--restore-bound", "1200")
# After the in-time window closed: a check result or a stale deadline would have to travel
# scrape (1 s) + evaluation (1 s) + group_wait (1 s); wait well past that.
GRACE = 8.0


@dataclass
class Target:
    name: str
    sidecar: Proc
    url: str
    instance: str


@dataclass
class Run:
    stack: Stack
    hook: WebhookReceiver
    prometheus: str
    alertmanager: str
    late: Target
    in_time: Target


def status(url: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(url + "/status", timeout=3).json()
    return data


@process_fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    # A module-scoped twin of the `stack` fixture: both tests share these processes, and every
    # one of them is stopped in the finally below.
    stack = Stack(tmp_path_factory.mktemp("alerts-e2e"))
    hook = WebhookReceiver().start()
    try:
        _, am = stack.alertmanager(
            AM_TEMPLATE.read_text().replace("__WEBHOOK_PORT__", str(hook.port))
            .replace("__TEMPLATE_DIR__", str(AM_DIR)))
        ports = {"late": free_port(), "in_time": free_port()}
        _, prom = stack.prometheus([f"127.0.0.1:{p}" for p in ports.values()],
                                   rule_files=RULE_FILES,
                                   alertmanager=am.removeprefix("http://"))
        # The scenario clocks start with the simulators: start both pairs together.
        engines = {
            "late": stack.simulator("outage", *SERVING, *LATE_ENGINE, "--seed", "21",
                                    wait=False)[1],
            "in_time": stack.simulator("outage", *SERVING, *IN_TIME_ENGINE, "--seed", "22",
                                       wait=False)[1],
        }
        extra = {"late": LATE_SIDECAR, "in_time": IN_TIME_SIDECAR}
        targets = {}
        for name, engine_url in engines.items():
            proc, url = stack.sidecar(engine_url, *SIDECAR, *extra[name], port=ports[name],
                                      state_dir=stack.tmp / f"state-{name}",
                                      name=f"sidecar-{name}", wait=False)
            targets[name] = Target(name, proc, url, f"127.0.0.1:{ports[name]}")
        for t in targets.values():
            wait_for(lambda t=t: http_ok(t.url + "/readyz"), 30, f"{t.name} ready", t.sidecar)
            assert status(t.url)["restore"]["window"] is None, f"{t.name}: window opened early"
        # Prometheus scrapes both before the outage (window_open 0 seen).
        wait_for(lambda: len(query(prom, f'helios_restore_window_open{{job="{JOB}"}} == 0')) == 2,
                 10, "both sidecars scraped")
        yield Run(stack, hook, prom, am, targets["late"], targets["in_time"])
    finally:
        stack.stop_all()
        hook.stop()
        # Every POST, for a failure post-mortem next to the process logs.
        (stack.tmp / "webhook.jsonl").write_text("".join(
            json.dumps({"path": p.path, "received_at": p.received_at, "body": p.body}) + "\n"
            for p in hook.posts()))


def wait_delivery(hook: WebhookReceiver, alertname: str, instance: str, status: str,
                  timeout: float) -> Delivery:
    try:
        found = hook.wait_for(
            lambda: hook.deliveries(alertname, status=status, instance=instance), timeout,
            f"{alertname} {status} for {instance}")
    except TimeoutError as exc:
        pytest.fail(str(exc))
    return found[0]


def assert_page(d: Delivery, alertname: str, instance: str, status: str) -> None:
    body = d.post.body
    assert d.post.receiver == "helios-page"
    assert body["version"] == "4"
    assert body["receiver"] == "helios-page"
    # One restore incident per target: the group holds the target's restore pages and notices,
    # so the notification's own status is "firing" while any of them still fires.
    assert body["groupLabels"] == {"job": JOB, "instance": instance}
    assert {k: body["commonLabels"].get(k) for k in ("job", "instance")} \
        == {"job": JOB, "instance": instance}
    assert d.status == status
    assert d.labels["severity"] == "critical"
    assert d.labels["alertname"] == alertname
    assert d.labels["job"] == JOB
    assert d.labels["instance"] == instance
    annotations = d.alert["annotations"]
    assert annotations["summary"] and annotations["description"]
    assert annotations["runbook_url"].endswith(f"/{alertname}.md")


def test_breached_bounds_page_and_resolve_after_the_restore(run: Run) -> None:
    t, hook = run.late, run.hook
    window = wait_for(lambda: status(t.url)["restore"]["window"], 30, "late: window open",
                      t.sidecar, interval=0.1)
    cutoff, restore = window["request_cutoff_deadline"], window["restore_deadline"]
    assert restore - window["start"] == pytest.approx(4)

    fired = {}
    for name, deadline in (("HeliosRequestCutoffBreached", cutoff),
                           ("HeliosRestoreBoundBreached", restore)):
        d = wait_delivery(hook, name, t.instance, "firing", 30)
        assert_page(d, name, t.instance, "firing")
        assert d.received_at >= deadline - 0.5, f"{name} paged before its deadline"
        fired[name] = d
    assert f"the incumbent engine on {JOB}/{t.instance} had 2 request(s) in flight" \
        in fired["HeliosRequestCutoffBreached"].alert["annotations"]["description"]

    st = wait_for(lambda: (s := status(t.url))["restore"]["last_window"] and s, 40,
                  "late: window closed", t.sidecar, interval=0.1)
    last = st["restore"]["last_window"]
    assert last["outcome"] == "late"
    assert st["restore"]["checks"]["drained_admission"] is False
    assert last["lost_requests"] == 2  # the two stuck requests died with the incumbent
    # Both pages fired while the window was still open, well before the restore.
    for name, d in fired.items():
        assert d.received_at < last["end"], f"{name} only arrived after the window closed"

    for name in fired:
        d = wait_delivery(hook, name, t.instance, "resolved", 20)
        assert_page(d, name, t.instance, "resolved")
        assert hook.deliveries(name, status="firing", instance=t.instance)[-1].received_at \
            < d.received_at
        if name == "HeliosRequestCutoffBreached":
            # The incumbent crashed with its stuck requests in flight: from then on nothing is
            # still running to be cut (the gauge reads 0), so the page resolves while the window
            # is still open, and the lost requests fail drained_admission at close (below).
            assert d.received_at < last["end"] + 10
            continue
        assert d.received_at >= last["end"], f"{name} resolved before the window closed"
        # group_interval is 1 s: resolution follows within a few seconds, not resolve_timeout.
        assert d.received_at - last["end"] < 10, f"{name} resolved slowly"
    # The stuck requests also fail the drained_admission check once the window has closed.
    d = wait_delivery(hook, "HeliosRestoreCheckFailed", t.instance, "firing", 20)
    assert_page(d, "HeliosRestoreCheckFailed", t.instance, "firing")
    assert d.labels["check"] == "drained_admission"
    assert d.received_at >= last["end"]

    # How they resolved: the notice fires in the same group, and the rendered text says it.
    notice = wait_delivery(hook, "HeliosRestoreWindowClosed", t.instance, "firing", 20)
    assert notice.post.receiver == "helios-page"
    assert notice.labels["outcome"] == "late"
    assert notice.labels["severity"] == "notice"
    bound_resolved = hook.deliveries("HeliosRestoreBoundBreached", status="resolved",
                                     instance=t.instance)[0]
    # The notice may reach Alertmanager a flush earlier than the resolve (Prometheus sends each
    # rule's alerts as it evaluates it), but the notification that carries the resolve carries the
    # whole group, the firing notice with it: that is what the on-call person reads.
    carried = {(a["labels"]["alertname"], a["status"]) for a in bound_resolved.post.alerts}
    assert ("HeliosRestoreWindowClosed", "firing") in carried, \
        f"the resolve arrived without its notice: {sorted(carried)}"

    def resolve_texts() -> list[str]:
        return [p.body["attachments"][0]["text"] for p in hook.posts()
                if p.path == "/helios-page/text"
                and re.search(r"RESOLVED at [^\n]*: HeliosRestoreBoundBreached\.",
                              p.body["attachments"][0]["text"])
                and f"{JOB}/{t.instance}" in p.body["attachments"][0]["title"]]

    text = hook.wait_for(resolve_texts, 20, "the rendered resolve text")[0]
    assert re.search(r"HeliosRestoreBoundBreached\.\nRestore window on "
                     rf"{re.escape(JOB)}/{re.escape(t.instance)} closed late at ", text), text
    assert "still open" not in text.split("RESOLVED at", 1)[1].split("\n\n")[0]


def test_restore_in_time_raises_no_restore_alert(run: Run) -> None:
    t, hook = run.in_time, run.hook
    # Positive control: the pipeline works for this target (info alert to helios-null).
    opened = wait_delivery(hook, "HeliosRestoreWindowOpen", t.instance, "firing", 30)
    assert opened.post.receiver == "helios-null"
    assert opened.labels["severity"] == "info"

    st = wait_for(lambda: (s := status(t.url))["restore"]["last_window"] and s, 40,
                  "in time: window closed", t.sidecar, interval=0.1)
    last = st["restore"]["last_window"]
    assert last["outcome"] == "in_time"
    assert all(st["restore"]["checks"].values()), st["restore"]["checks"]
    resolved = wait_delivery(hook, "HeliosRestoreWindowOpen", t.instance, "resolved", 20)
    assert resolved.received_at >= last["end"]
    # Prometheus has seen the window open and then closed.
    wait_for(lambda: query(run.prometheus, f'helios_restore_window_open{{instance="{t.instance}"}}'
                                            " == 0"), 10, "window_open 0 scraped")
    assert query(run.prometheus, f'max_over_time(helios_restore_window_open{{instance='
                                 f'"{t.instance}"}}[5m]) == 1')

    time.sleep(max(0.0, last["end"] + GRACE - time.time()))
    leaked = [d for d in hook.deliveries(instance=t.instance)
              if d.labels.get("alertname") in RESTORE_ALERTS]
    assert not leaked, [f"{d.post.receiver} {d.status} {d.labels}" for d in leaked]
    # Nothing for this target but the info alert, on no receiver.
    names = {d.labels.get("alertname") for d in hook.deliveries(instance=t.instance)}
    assert names == {"HeliosRestoreWindowOpen"}, names


def test_shipped_rule_files_are_loaded(run: Run) -> None:
    """The Prometheus of this module runs the shipped files, not copies."""
    groups = httpx.get(f"{run.prometheus}/api/v1/rules", timeout=5).json()["data"]["groups"]
    files = {Path(g["file"]).resolve() for g in groups}
    assert files == {p.resolve() for p in RULE_FILES}
    names = {r["name"] for g in groups for r in g["rules"] if r["type"] == "alerting"}
    assert set(RESTORE_ALERTS) <= names
    assert not run.hook.bad_posts()
