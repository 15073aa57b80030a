"""deploy/ha/: the facts its files must agree on with the rules and with each other. The files
themselves run in tests/e2e/test_ha_e2e.py and tests/e2e/test_sharded_e2e.py; these checks hold
what those tests cannot see at their compressed timings, and the kube-prometheus-stack values,
which nothing here can run."""

from __future__ import annotations

from typing import Any

import yaml

from alerts.generate import load_config
from exporter import durations

from .conftest import DEPLOY

HA = DEPLOY / "ha"


def _flags(name: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for raw in (HA / name).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.lstrip("-").partition("=")
            out.setdefault(key, []).append(value)
    return out


def _yaml(path: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((HA / path).read_text(encoding="utf-8"))
    return doc


def _s(text: str) -> float:
    return durations.seconds(text)


def test_a_restarted_replica_restores_every_shipped_for() -> None:
    """Prometheus restores the `for:` state of an alert only when its `for:` is at least
    --rules.alert.for-grace-period (default 10m: none of the shipped ones shorter than 10m),
    after an outage no longer than --rules.alert.for-outage-tolerance."""
    config = load_config()
    shortest = min(d.seconds for d in config.for_.values() if d.seconds)
    flags = _flags("prometheus.flags")
    (grace,) = flags["rules.alert.for-grace-period"]
    (tolerance,) = flags["rules.alert.for-outage-tolerance"]
    assert _s(grace) < shortest, (grace, shortest)
    assert _s(tolerance) >= config.window_memory.seconds
    kps = {a["name"]: a["value"] for a in _yaml("kps-values-ha.yaml")["prometheus"][
        "prometheusSpec"]["additionalArgs"]}
    assert kps == {"rules.alert.for-grace-period": grace,
                   "rules.alert.for-outage-tolerance": tolerance}


def test_the_replica_label_is_dropped_from_alerts() -> None:
    prom = _yaml("prometheus.yml")
    assert prom["global"]["external_labels"] == {"replica": "${HELIOS_REPLICA}"}
    assert "expand-external-labels" in _flags("prometheus.flags")["enable-feature"]
    assert prom["alerting"]["alert_relabel_configs"] == [{"action": "labeldrop",
                                                          "regex": "replica"}]
    kps = _yaml("kps-values-ha.yaml")
    assert kps["prometheus"]["prometheusSpec"]["replicas"] == 2
    assert kps["alertmanager"]["alertmanagerSpec"]["replicas"] == 2


def test_the_peer_timeout_is_below_every_group_interval() -> None:
    """Otherwise the second Alertmanager sends its stale copy of a group the first has notified
    again since, and a resolved page arrives again as firing (deploy/ha/alertmanager.flags)."""
    am = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text(encoding="utf-8"))
    intervals = [am["route"]["group_interval"]] + [
        r["group_interval"] for r in am["route"]["routes"] if "group_interval" in r]
    (peer_timeout,) = _flags("alertmanager.flags")["cluster.peer-timeout"]
    assert _s(peer_timeout) < min(_s(i) for i in intervals) / 2, (peer_timeout, intervals)
    assert len(_flags("alertmanager.flags")["cluster.peer"]) == 2


def test_every_rule_engine_evaluates_as_prometheus_does() -> None:
    interval = _yaml("prometheus.yml")["global"]["evaluation_interval"]
    vmalert = _flags("vmalert.flags")
    assert vmalert["evaluationInterval"] == [interval]
    assert len(vmalert["notifier.url"]) == 2
    # The restore memory is recorded and read back: vmalert must write it to the store it reads.
    assert vmalert["remoteWrite.url"] == vmalert["datasource.url"]
    (offset,) = _flags("victoria-metrics.flags")["search.latencyOffset"]
    assert _s(offset) <= _s(interval)
    assert _s(_yaml("vmagent-scrape.yml")["global"]["scrape_interval"]) == _s(interval)
    assert _s(_yaml("prometheus-agent.yml")["global"]["scrape_interval"]) == _s(interval)
    assert _flags("vmagent.flags")["promscrape.cluster.membersCount"] == ["2"]
    assert _flags("prometheus-agent.flags")["enable-feature"] == ["agent"]
