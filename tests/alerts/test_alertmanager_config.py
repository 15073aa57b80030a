"""deploy/alertmanager: amtool checks, routing per severity, and inhibition on a real Alertmanager."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.harness import free_port
from tools.webhook import Post, WebhookReceiver

TIMERS = {"group_wait", "group_interval", "repeat_interval"}
NOTICES = {"HeliosRestoreWindowClosed", "HeliosRestoreWindowForgotten"}


def _amtool(amtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([amtool, *args], check=False, capture_output=True, text=True, timeout=60)


def test_check_config(root: Path, amtool: str) -> None:
    result = _amtool(amtool, "check-config", str(root / "deploy/alertmanager/alertmanager.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def filled_test_config(root: Path, port: int) -> str:
    """alertmanager-test.yml with its placeholders filled in."""
    template = (root / "deploy/alertmanager/alertmanager-test.yml").read_text(encoding="utf-8")
    assert "__WEBHOOK_PORT__" in template
    assert "__TEMPLATE_DIR__" in template
    return template.replace("__WEBHOOK_PORT__", str(port)).replace(
        "__TEMPLATE_DIR__", str(root / "deploy/alertmanager")
    )


def test_check_test_config(root: Path, amtool: str, tmp_path: Path) -> None:
    (tmp_path / "am.yml").write_text(filled_test_config(root, 18080))
    result = _amtool(amtool, "check-config", str(tmp_path / "am.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert " - 1 templates" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["severity=critical", "alertname=HeliosRestoreBoundBreached"], "helios-page"),
        (["severity=warning", "alertname=HeliosExporterDown"], "helios-ticket"),
        (["severity=warning", "alertname=HeliosExporterCollectorFailing", "collector=gpu"],
         "helios-ticket"),
        (["severity=warning", "alertname=HeliosExporterWebConfigReloadFailed"], "helios-ticket"),
        (["severity=info", "alertname=HeliosRestoreWindowOpen"], "helios-null"),
        (["severity=warning", "alertname=HeliosOffloadStoresDropped", "outcome=dropped_full"],
         "helios-ticket"),
        (["severity=info", "alertname=HeliosOffloadCacheInert"], "helios-null"),
        (["alertname=SomethingWithoutSeverity"], "helios-ticket"),
        # The restore incident group: pages and the notices that say how they resolved.
        (["severity=critical", "alertname=HeliosRequestCutoffBreached"], "helios-page"),
        (["severity=critical", "alertname=HeliosRestoreCheckFailed"], "helios-page"),
        (["severity=notice", "alertname=HeliosRestoreWindowClosed"], "helios-page"),
        (["severity=notice", "alertname=HeliosRestoreWindowForgotten"], "helios-page"),
        (["severity=warning", "alertname=HeliosRestoreBoundAtRisk"], "helios-ticket"),
        (["severity=critical", "alertname=HeliosEnginePinMismatch"], "helios-page"),
    ],
)
def test_routes(root: Path, amtool: str, labels: list[str], receiver: str) -> None:
    result = _amtool(
        amtool,
        "config",
        "routes",
        "test",
        "--config.file",
        str(root / "deploy/alertmanager/alertmanager.yml"),
        *labels,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def _strip_timers(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_timers(v) for k, v in node.items() if k not in TIMERS}
    if isinstance(node, list):
        return [_strip_timers(v) for v in node]
    return node


def test_test_config_has_the_same_routing_and_inhibitions(root: Path) -> None:
    main = yaml.safe_load((root / "deploy/alertmanager/alertmanager.yml").read_text())
    test = yaml.safe_load((root / "deploy/alertmanager/alertmanager-test.yml").read_text())
    assert _strip_timers(test["route"]) == _strip_timers(main["route"])
    assert test["inhibit_rules"] == main["inhibit_rules"]
    assert main["templates"] == ["helios.tmpl"]
    assert test["templates"] == ["__TEMPLATE_DIR__/helios.tmpl"]
    assert [r["name"] for r in test["receivers"]] == [r["name"] for r in main["receivers"]]
    for receiver, prod in zip(test["receivers"], main["receivers"], strict=True):
        (hook,) = receiver["webhook_configs"]
        assert hook["url"] == f"http://127.0.0.1:__WEBHOOK_PORT__/{receiver['name']}"
        # The same notification text as in production, posted to <receiver>/text.
        texts = receiver.get("slack_configs", [])
        assert [(t["title"], t["text"]) for t in texts] == [
            (t["title"], t["text"]) for t in prod.get("slack_configs", [])
        ]
        for text in texts:
            assert text["api_url"] == f"http://127.0.0.1:__WEBHOOK_PORT__/{receiver['name']}/text"


def test_route_group_by_matches_the_rule_labels(root: Path, generate: Any) -> None:
    config = generate.load_config(root / "alerts/config.yaml")
    main = yaml.safe_load((root / "deploy/alertmanager/alertmanager.yml").read_text())
    assert main["route"]["group_by"] == ["alertname", *config.join_labels]
    for rule in main["inhibit_rules"]:
        assert rule["equal"] == list(config.join_labels)
    restore = main["route"]["routes"][0]
    assert restore["group_by"] == list(config.join_labels)


def test_restore_route_groups_the_restore_pages_with_their_notices(root: Path, generate: Any) -> None:
    """Every critical restore alert, and the notices that explain their resolves, in one group."""
    config = generate.load_config(root / "alerts/config.yaml")
    wanted = {
        a.name for a in generate.alerts(config)
        if a.group == "helios-restore" and (a.severity == "critical" or a.name in NOTICES)
    }
    main = yaml.safe_load((root / "deploy/alertmanager/alertmanager.yml").read_text())
    (matcher,) = main["route"]["routes"][0]["matchers"]
    match = re.fullmatch(r'alertname=~"([^"]+)"', matcher)
    assert match, matcher
    assert set(match.group(1).split("|")) == wanted


# ---------------------------------------------------------------------------------------------
# End to end: the real Alertmanager binary with alertmanager-test.yml and a local webhook.


class _Hook:
    def __init__(self) -> None:
        self.received: list[tuple[str, str, str]] = []  # (receiver path, alertname, instance)
        self.lock = threading.Lock()

    def seen(self) -> set[tuple[str, str, str]]:
        with self.lock:
            return set(self.received)


@pytest.fixture
def webhook() -> Iterator[tuple[int, _Hook]]:
    hook = _Hook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with hook.lock:
                # The rendered text (<receiver>/text) has no alerts list: routing only here.
                for alert in body.get("alerts", []):
                    labels = alert["labels"]
                    hook.received.append(
                        (self.path.strip("/"), labels["alertname"], labels.get("instance", ""))
                    )
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], hook
    server.shutdown()
    server.server_close()


def _alert(name: str, severity: str, instance: str) -> dict[str, Any]:
    return {
        "labels": {
            "alertname": name,
            "severity": severity,
            "job": "helios-exporter",
            "instance": instance,
        },
        "annotations": {"summary": name},
    }


@contextlib.contextmanager
def running_alertmanager(root: Path, tmp_path: Path, hook_port: int) -> Iterator[str]:
    """A real Alertmanager with alertmanager-test.yml posting to `hook_port`; yields its URL."""
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        pytest.skip("Alertmanager not installed")
    (tmp_path / "am.yml").write_text(filled_test_config(root, hook_port))
    port = free_port()
    log = tmp_path / "alertmanager.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp_path / 'am.yml'}",
                f"--storage.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, "Alertmanager did not become ready"
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _post_alerts(base: str, alerts: list[dict[str, Any]]) -> None:
    request = urllib.request.Request(
        f"{base}/api/v2/alerts",
        data=json.dumps(alerts).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.status == 200


@pytest.mark.e2e
def test_routing_and_inhibition_on_a_real_alertmanager(
    root: Path, tmp_path: Path, webhook: tuple[int, _Hook]
) -> None:
    hook_port, hook = webhook
    with running_alertmanager(root, tmp_path, hook_port) as base:
        alerts = [
            # h1: planned outage; its HeliosExporterDown is inhibited by the open window.
            _alert("HeliosRestoreWindowOpen", "info", "h1:9400"),
            _alert("HeliosExporterDown", "warning", "h1:9400"),
            # h2: no window, so its HeliosExporterDown is a ticket.
            _alert("HeliosExporterDown", "warning", "h2:9400"),
            # h3: breached, so its at-risk warning is inhibited; h4 only at risk.
            _alert("HeliosRestoreBoundBreached", "critical", "h3:9400"),
            _alert("HeliosRestoreBoundAtRisk", "warning", "h3:9400"),
            _alert("HeliosRestoreBoundAtRisk", "warning", "h4:9400"),
            _alert("HeliosRestoreCheckFailed", "critical", "h4:9400"),
        ]
        _post_alerts(base, alerts)

        expected = {
            ("helios-null", "HeliosRestoreWindowOpen", "h1:9400"),
            ("helios-ticket", "HeliosExporterDown", "h2:9400"),
            ("helios-page", "HeliosRestoreBoundBreached", "h3:9400"),
            ("helios-ticket", "HeliosRestoreBoundAtRisk", "h4:9400"),
            ("helios-page", "HeliosRestoreCheckFailed", "h4:9400"),
        }
        deadline = time.monotonic() + 20
        while not expected <= hook.seen() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2)  # group_wait/group_interval are 1s: inhibited alerts would be here by now
        assert hook.seen() == expected


def _restore_alert(
    name: str, severity: str, summary: str, ends: float | None = None, **labels: str
) -> dict[str, Any]:
    alert: dict[str, Any] = {
        "labels": {"alertname": name, "severity": severity, "job": "helios-exporter",
                   "instance": "h1:9400", **labels},
        "annotations": {"summary": summary, "description": f"{summary} (firing description)",
                        "runbook_url": f"https://runbooks.example/{name}.md"},
    }
    if ends is not None:
        alert["endsAt"] = datetime.fromtimestamp(ends, UTC).isoformat()
    return alert


@pytest.mark.e2e
def test_a_resolve_arrives_with_its_notice_rendered_by_a_real_alertmanager(
    root: Path, tmp_path: Path
) -> None:
    """The restore group carries the resolved pages and the notice that says how they resolved
    in one notification, and helios.tmpl renders them truthfully (Slack payload at /text)."""
    breach = ("HeliosRestoreBoundBreached", "critical", "Restore bound breached on helios-exporter/h1:9400")
    cutoff = ("HeliosRequestCutoffBreached", "critical",
              "Incumbent requests in flight after the request cutoff on helios-exporter/h1:9400")
    closed = "Restore window on helios-exporter/h1:9400 closed late at 2026-03-02 03:50:00 +0000 UTC"
    with WebhookReceiver() as hook, running_alertmanager(root, tmp_path, hook.port) as base:
        _post_alerts(base, [_restore_alert(*breach, bound="restore"), _restore_alert(*cutoff)])
        firing = hook.wait_for(lambda: [p for p in hook.posts() if p.path == "/helios-page/text"],
                               20, "the firing page text")[0]
        (attachment,) = firing.body["attachments"]
        assert attachment["title"] == (
            "[FIRING] Helios helios-exporter/h1:9400: HeliosRequestCutoffBreached "
            "HeliosRestoreBoundBreached"
        )
        assert "(firing description)" in attachment["text"]

        # The window closes late: Prometheus resolves both pages and fires the notice (and
        # the failed drained_admission check) in the same evaluation.
        now = time.time()
        _post_alerts(base, [
            _restore_alert(*breach, ends=now, bound="restore"),
            _restore_alert(*cutoff, ends=now),
            _restore_alert("HeliosRestoreWindowClosed", "notice", closed, outcome="late"),
            _restore_alert("HeliosRestoreCheckFailed", "critical",
                           "Post-restore check drained_admission failed on helios-exporter/h1:9400",
                           check="drained_admission"),
        ])

        def resolved_text() -> list[str]:
            return [p.body["attachments"][0]["text"] for p in hook.posts()
                    if p.path == "/helios-page/text" and "RESOLVED at" in p.body["attachments"][0]["text"]]

        (text,) = hook.wait_for(resolved_text, 20, "the resolve text")
        for name in ("HeliosRestoreBoundBreached", "HeliosRequestCutoffBreached"):
            assert re.search(rf"RESOLVED at [0-9-]+ [0-9:]+ UTC: {name}\.\n{re.escape(closed)}\.", text), text
        # The check that still fires shows its description; the resolved pages never do.
        assert "drained_admission failed on helios-exporter/h1:9400 (firing description)" in text
        for _, _, summary in (breach, cutoff):
            assert f"{summary} (firing description)" not in text
        assert f"NOTICE: {closed}" in text

        # The webhook payload of the same notification (its own post, which may arrive after
        # the text one): one group per target.
        def resolved_payload() -> list[Post]:
            return [p for p in hook.posts() if p.path == "/helios-page"
                    and any(a["status"] == "resolved" for a in p.alerts)]

        (payload,) = hook.wait_for(resolved_payload, 20, "the resolve payload")
        last = payload.body
        assert last["groupLabels"] == {"job": "helios-exporter", "instance": "h1:9400"}
        got = {(a["labels"]["alertname"], a["status"]) for a in last["alerts"]}
        assert got == {
            ("HeliosRestoreBoundBreached", "resolved"),
            ("HeliosRequestCutoffBreached", "resolved"),
            ("HeliosRestoreWindowClosed", "firing"),
            ("HeliosRestoreCheckFailed", "firing"),
        }
