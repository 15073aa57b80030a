"""A resolve and the notice that says how it resolved, through the real chain: a real
Prometheus evaluating the SHIPPED alerts/helios-alerts.yaml (1 s scrape and evaluation), a real
Alertmanager with deploy/alertmanager/alertmanager-test.yml and helios.tmpl, a webhook here.

The scraped target is a scripted exposition of the sidecar's restore series (the interface's
names, synthetic values, like the promtool tests' input series), so this test does not depend on
a sidecar build: first a window open past both deadlines with 2 incumbent requests in flight,
then the same window closed late with `drained_admission` failed. It proves what promtool
cannot: that Prometheus sends the notice no later than the resolves it explains (rule order), so
Alertmanager delivers each resolve in a notification with it, and that helios.tmpl renders it
truthfully.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.procs import ROOT, Stack
from tests.process_guard import process_fixture
from tools.harness import StubEngine
from tools.webhook import WebhookReceiver

pytestmark = pytest.mark.e2e

JOB = "helios-exporter"
AM_DIR = ROOT / "deploy" / "alertmanager"
PAGES = ("HeliosRequestCutoffBreached", "HeliosRestoreBoundBreached")


def window_open(start: float) -> str:
    return (f"helios_restore_window_open 1\n"
            f"helios_restore_window_start_timestamp_seconds {start}\n"
            f'helios_restore_deadline_timestamp_seconds{{bound="request_cutoff"}} {start + 60}\n'
            f'helios_restore_deadline_timestamp_seconds{{bound="restore"}} {start + 80}\n'
            "helios_restore_incumbent_inflight_requests 2\n")


def window_closed_late(start: float, end: float) -> str:
    outcomes = "".join(f'helios_restore_last_window_outcome{{outcome="{o}"}} {int(o == "late")}\n'
                       for o in ("in_time", "late", "aborted", "unobserved"))
    return ("helios_restore_window_open 0\n"
            f"helios_restore_last_window_start_timestamp_seconds {start}\n"
            f"helios_restore_last_window_end_timestamp_seconds {end}\n"
            f"{outcomes}"
            "helios_restore_last_window_lost_requests 2\n"
            'helios_restore_check_ok{check="drained_admission"} 0\n'
            'helios_restore_check_ok{check="container"} 1\n')


@process_fixture
def chain(tmp_path: Any) -> Iterator[tuple[StubEngine, float, WebhookReceiver]]:
    """The scraped target (its /metrics changed by the test between phases), the scripted
    window's start, the webhook."""
    stack = Stack(tmp_path)
    with StubEngine() as target, WebhookReceiver() as hook:
        try:
            _, am = stack.alertmanager(
                (AM_DIR / "alertmanager-test.yml").read_text()
                .replace("__WEBHOOK_PORT__", str(hook.port)).replace("__TEMPLATE_DIR__", str(AM_DIR)))
            start = time.time() - 100  # both deadlines already passed
            target.metrics = window_open(start)
            stack.prometheus([target.target], rule_files=[ROOT / "alerts" / "helios-alerts.yaml"],
                             alertmanager=am.removeprefix("http://"))
            yield target, start, hook
        finally:
            stack.stop_all()


def test_the_late_close_resolves_each_page_in_a_notification_with_its_notice(
    chain: tuple[StubEngine, float, WebhookReceiver],
) -> None:
    target, start, hook = chain
    instance = target.target
    for name in PAGES:
        hook.wait_for(lambda n=name: hook.deliveries(n, status="firing", instance=instance),
                      30, f"{name} firing")
    target.metrics = window_closed_late(start, time.time())

    notice = ("HeliosRestoreWindowClosed", "firing", "late")
    # A page not resolved yet may still be firing beside the one that resolved.
    expected = {(name, status, None) for name in PAGES for status in ("resolved", "firing")} | {
        notice, ("HeliosRestoreCheckFailed", "firing", "drained_admission")}
    for name in PAGES:
        resolved = hook.wait_for(
            lambda n=name: hook.deliveries(n, status="resolved", instance=instance),
            30, f"{name} resolved")[0]
        body = resolved.post.body
        assert resolved.post.receiver == "helios-page"
        assert body["groupLabels"] == {"job": JOB, "instance": instance}
        got = {(a["labels"]["alertname"], a["status"],
                a["labels"].get("outcome", a["labels"].get("check"))) for a in body["alerts"]}
        # The notice reached Alertmanager no later than the resolve (rule order), so the
        # notification that resolves the page carries it. The two pages resolve in the same
        # evaluation but are sent to Alertmanager rule by rule: a flush may fall between them.
        assert notice in got and got <= expected, got
    hook.wait_for(lambda: hook.deliveries("HeliosRestoreCheckFailed", status="firing",
                                          instance=instance, receiver="helios-page"),
                  30, "the failed check")

    def resolve_texts() -> list[str]:
        return [p.body["attachments"][0]["text"] for p in hook.posts()
                if p.path == "/helios-page/text" and "RESOLVED at" in p.body["attachments"][0]["text"]]

    closed = f"Restore window on {JOB}/{instance} closed late at "
    for name in PAGES:
        pattern = rf"RESOLVED at [0-9: -]+UTC: {name}\.\n{re.escape(closed)}"
        hook.wait_for(lambda pat=pattern: [t for t in resolve_texts() if re.search(pat, t)],
                      20, f"the rendered resolve of {name}")
    for text in resolve_texts():
        for block in text.split("\n\n"):
            if block.lstrip("\n").startswith("RESOLVED at"):
                assert "still open" not in block and "will be cut" not in block, block
    hook.wait_for(lambda: [t for t in hook.posts() if t.path == "/helios-page/text"
                           and "FIRING since" in t.body["attachments"][0]["text"]
                           and "drained_admission" in t.body["attachments"][0]["text"]],
                  20, "the rendered failed check")
    assert not hook.bad_posts()
