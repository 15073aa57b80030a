"""`serve --expect-layout` end to end on 127.0.0.1: two simulated engines, one serving the
generic tier (rows of 16 MiB) and one `--geometry hybrid-tp2` (the layout's records), each
watched by a sidecar pinned to tests/fixtures/layouts/hybrid-tp2.json, scraped by a real
Prometheus evaluating the SHIPPED alerts/helios-alerts.yaml, which notifies a real
Alertmanager with deploy/alertmanager/alertmanager-test.yml, which posts to a webhook here.

The only change to the shipped rules: HeliosOffloadGeometryInconsistent's `for:` (5m, for a
snapshot read non-atomically) is 0s here, so the test does not wait five minutes. The engine
whose records differ raises the alert, routed to helios-ticket (severity warning); the one whose
records match never does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import FIXTURES
from tests.e2e.procs import ROOT, Stack, free_port, query, wait_for
from tools.webhook import WebhookReceiver

pytestmark = pytest.mark.e2e

ALERT = "HeliosOffloadGeometryInconsistent"
LAYOUT = FIXTURES / "layouts" / "hybrid-tp2.json"
AM_DIR = ROOT / "deploy" / "alertmanager"


def rules_without_the_wait(tmp: Path) -> Path:
    doc = yaml.safe_load((ROOT / "alerts" / "helios-alerts.yaml").read_text())
    [rule] = [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    assert rule["for"] == "5m"  # what ships
    rule["for"] = "0s"
    out = tmp / "helios-alerts.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


@pytest.fixture
def hook() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


def fired(hook: WebhookReceiver, instance: str) -> list[tuple[str, dict[str, Any]]]:
    return [(post.receiver, alert) for post in hook.posts() for alert in post.alerts
            if alert["labels"].get("alertname") == ALERT
            and alert["labels"].get("instance") == instance and alert["status"] == "firing"]


def test_an_engine_whose_records_differ_raises_the_alert_and_one_that_matches_does_not(
        stack: Stack, hook: WebhookReceiver, tmp_path: Path) -> None:
    _, am = stack.alertmanager(
        (AM_DIR / "alertmanager-test.yml").read_text()
        .replace("__WEBHOOK_PORT__", str(hook.port)).replace("__TEMPLATE_DIR__", str(AM_DIR)))
    pinned = ("--expect-layout", str(LAYOUT), "--poll-interval", "0.5")
    ports = {"generic": free_port(), "hybrid-tp2": free_port()}
    sidecars = {}
    for geometry, port in ports.items():
        _, engine = stack.simulator("idle", "--geometry", geometry, "--seed", "1",
                                    name=f"engine-{geometry}")
        proc, url = stack.sidecar(engine, *pinned, port=port, name=f"sidecar-{geometry}")
        sidecars[geometry] = (proc, url, f"127.0.0.1:{port}")
    _, prom = stack.prometheus([s[2] for s in sidecars.values()],
                               rule_files=[rules_without_the_wait(tmp_path)],
                               alertmanager=am.removeprefix("http://"))

    # The sidecar: the generic engine's rows are not the layout's; /status says what and how.
    status = httpx.get(sidecars["generic"][1] + "/status", timeout=5).json()
    (rule,) = [r for r in status["offload_geometry"]["rules"]
               if r["rule"] == "record_bytes_match_layout"]
    assert (rule["ok"], rule["expected"], rule["found"]) == (
        False, {"row": 163586048, "page": 1048576}, {"row": 16777216, "page": 1048576})
    good = httpx.get(sidecars["hybrid-tp2"][1] + "/status", timeout=5).json()["offload_geometry"]
    assert good["consistent"] is True and good["rules"][-1]["rule"] == "record_bytes_match_layout"

    # Prometheus -> Alertmanager -> the ticket receiver, for the generic engine only.
    generic, seed = sidecars["generic"][2], sidecars["hybrid-tp2"][2]
    deliveries = wait_for(lambda: fired(hook, generic), 60, f"{ALERT} for {generic} at the webhook",
                          sidecars["generic"][0])
    receiver, alert = deliveries[0]
    assert receiver == "helios-ticket"
    assert alert["labels"]["severity"] == "warning"
    assert alert["labels"]["generation"] == status["generation"]
    assert "each slab's record bytes as the pinned model layout derives them" in \
        alert["annotations"]["description"]
    values = {r["metric"]["instance"]: float(r["value"][1])
              for r in query(prom, "helios_offload_geometry_consistent")}
    assert values == {generic: 0.0, seed: 1.0}
    time.sleep(3)  # several evaluations and flushes after the other fired
    assert fired(hook, seed) == []
    assert query(prom, f'ALERTS{{alertname="{ALERT}", instance="{seed}"}}') == []
