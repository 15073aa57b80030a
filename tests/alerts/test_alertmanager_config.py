"""deploy/alertmanager: amtool checks, routing per severity, and inhibition on a real Alertmanager."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.harness import free_port

TIMERS = {"group_wait", "group_interval", "repeat_interval"}


def _amtool(amtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([amtool, *args], check=False, capture_output=True, text=True, timeout=60)


def test_check_config(root: Path, amtool: str) -> None:
    result = _amtool(amtool, "check-config", str(root / "deploy/alertmanager/alertmanager.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_check_test_config(root: Path, amtool: str, tmp_path: Path) -> None:
    template = (root / "deploy/alertmanager/alertmanager-test.yml").read_text(encoding="utf-8")
    assert "__WEBHOOK_PORT__" in template
    (tmp_path / "am.yml").write_text(template.replace("__WEBHOOK_PORT__", "18080"))
    result = _amtool(amtool, "check-config", str(tmp_path / "am.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["severity=critical", "alertname=HeliosRestoreBoundBreached"], "helios-page"),
        (["severity=warning", "alertname=HeliosExporterDown"], "helios-ticket"),
        (["severity=info", "alertname=HeliosRestoreWindowOpen"], "helios-null"),
        (["alertname=SomethingWithoutSeverity"], "helios-ticket"),
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
    assert [r["name"] for r in test["receivers"]] == [r["name"] for r in main["receivers"]]
    for receiver in test["receivers"]:
        (hook,) = receiver["webhook_configs"]
        assert hook["url"] == f"http://127.0.0.1:__WEBHOOK_PORT__/{receiver['name']}"


def test_route_group_by_matches_the_rule_target_labels(root: Path, generate: Any) -> None:
    config = generate.load_config(root / "alerts/config.yaml")
    main = yaml.safe_load((root / "deploy/alertmanager/alertmanager.yml").read_text())
    assert main["route"]["group_by"] == ["alertname", *config.target_labels]
    for rule in main["inhibit_rules"]:
        assert rule["equal"] == list(config.target_labels)


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
                for alert in body["alerts"]:
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


@pytest.mark.e2e
def test_routing_and_inhibition_on_a_real_alertmanager(
    root: Path, tmp_path: Path, webhook: tuple[int, _Hook]
) -> None:
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        pytest.skip("Alertmanager not installed")
    hook_port, hook = webhook
    template = (root / "deploy/alertmanager/alertmanager-test.yml").read_text(encoding="utf-8")
    (tmp_path / "am.yml").write_text(template.replace("__WEBHOOK_PORT__", str(hook_port)))
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
        request = urllib.request.Request(
            f"{base}/api/v2/alerts",
            data=json.dumps(alerts).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.status == 200

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
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
