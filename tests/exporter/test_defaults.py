"""Each default is defined once (exporter/defaults.py); where a value must also appear outside
the sidecar (the alert configuration in alerts/), these tests tie the two."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
import yaml

from alerts.config import Config as AlertConfig
from alerts.generate import load_config
from exporter import config, defaults
from exporter.cycle import derive
from exporter.restore.window import Bounds
from exporter.snapshot.model import Snapshot
from exporter.snapshot.parse import snapshot_from_obj
from tests.conftest import ROOT

ALERTS = ROOT / "alerts"


def alert_config() -> AlertConfig:
    """alerts/config.yaml through the alerts' own reader."""
    return load_config(ALERTS / "config.yaml")


def alert_rule(name: str) -> dict[str, Any]:
    rules = yaml.safe_load((ALERTS / "helios-alerts.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == name:
                return dict(rule)
    raise AssertionError(f"{name} not in alerts/helios-alerts.yaml")


def test_page_headroom_is_the_alert_configs() -> None:
    configured = alert_config().page_headroom_ratio
    assert configured == defaults.PAGE_HEADROOM_RATIO
    expr = alert_rule("HeliosOffloadRowPressureWithPageHeadroom")["expr"]
    assert re.search(rf"\)\s*>=\s*{re.escape(str(configured))}\s*\)", expr), expr


def _snap(attempts: int, page_free: int) -> Snapshot:
    return snapshot_from_obj({"schema_version": 1, "generation": "g1", "offload": {
        "slabs": {"page": {"capacity": 100, "free": page_free, "record_bytes": 1}},
        "evictions": {"row": {"attempts": attempts}}}})


@pytest.mark.parametrize(("offset", "counted"), [(0, 5), (-1, 0), (+1, 5)])
def test_derived_headroom_threshold_is_the_alert_configs(offset: int, counted: int) -> None:
    """The counter the alert reads counts attempts exactly from the configured ratio up."""
    page_free = round(alert_config().page_headroom_ratio * 100) + offset
    first = derive.advance_headroom(None, _snap(10, page_free))
    second = derive.advance_headroom(first, _snap(15, page_free))
    assert second is not None and second.total == counted


def test_restore_bound_and_down_grace_are_what_the_alerts_assume() -> None:
    cfg = alert_config()
    # Prometheus remembers a window that stops reporting for longer than the whole bound.
    assert cfg.window_memory.seconds > defaults.RESTORE_BOUND
    # The alerts are tuned for the sidecars' default grace, and fire before it runs out.
    assert cfg.down_grace.seconds == defaults.DOWN_GRACE
    assert cfg.for_["HeliosEngineSnapshotFailing"].seconds < defaults.DOWN_GRACE


def test_every_option_default_is_the_config_default() -> None:
    """OPTIONS (flags, env, README table) and the Config dataclass cannot drift apart."""
    fields = {f.name: f.default for f in dataclasses.fields(config.Config)}
    assert set(fields) - {"listen_host", "listen_port"} == {o.dest for o in config.OPTIONS} - {
        "listen"}, "every Config field is an option, every option a field"
    for opt in config.OPTIONS:
        if opt.kind == "listen":
            host, port = opt.default.rsplit(":", 1)
            assert (fields["listen_host"], fields["listen_port"]) == (host, int(port))
        elif opt.kind == "path" and opt.default is not None:
            assert str(fields[opt.dest]) == opt.default
        elif opt.dest != "engine_url":
            assert fields[opt.dest] == opt.default, opt.flag
    assert Bounds() == Bounds(fields["request_cutoff"], fields["restore_bound"],
                              fields["down_grace"])


def test_a_recent_restart_on_the_status_page_is_as_long_as_the_alert_fires() -> None:
    configured = alert_config().restart_window
    assert configured.seconds == defaults.RESTART_RECENT
    expr = alert_rule("HeliosEngineRestartedOutsideWindow")["expr"]
    assert f"[{configured.text}]" in expr, expr


def test_the_status_page_warns_of_a_certificate_when_the_alerts_fire() -> None:
    """The status page's two stages of an expiring certificate are the two alerts'."""
    config = alert_config()
    assert config.certificate_ticket.seconds == defaults.CERT_EXPIRY_TICKET
    assert config.certificate_page.seconds == defaults.CERT_EXPIRY_PAGE
    ticket = alert_rule("HeliosExporterCertificateExpiring")["expr"]
    assert f"< {defaults.CERT_EXPIRY_TICKET:.0f} and" in ticket
    assert f">= {defaults.CERT_EXPIRY_PAGE:.0f}" in ticket
    assert alert_rule("HeliosExporterCertificateExpiryImminent")["expr"].endswith(
        f"< {defaults.CERT_EXPIRY_PAGE:.0f}")
