"""The rule groups, in output order (kubernetes-mixin's list of alert files).

Each module has `alerts(config)`, the declarations of its alerts (alerts/rules.py); a module may
also have `records(config)`: recording rules its alerts need, rendered into the alerts file
beside them so that file works alone. Dashboard recording rules are in `recording`.
"""

from __future__ import annotations

from types import ModuleType

from alerts.config import Config
from alerts.groups import (
    dcgm,
    engine,
    exporter,
    gpu,
    offload,
    recording,
    restore_checks,
    restore_deadlines,
    restore_state,
    restore_window,
)
from alerts.rules import Alert, Record

# The window notices come first: rules of a group are evaluated and sent to Alertmanager in
# order, so a notice (HeliosRestoreWindowClosed / Forgotten) reaches Alertmanager no later than
# the resolves it explains, and no notification flush can fall between them.
ALERT_GROUPS: tuple[ModuleType, ...] = (
    restore_window,
    restore_deadlines,
    restore_checks,
    exporter,
    restore_state,
    engine,
    offload,
    gpu,
)


def alerts(c: Config) -> list[Alert]:
    return [alert for group in ALERT_GROUPS for alert in group.alerts(c)]


def declared_for(c: Config) -> list[tuple[str, str]]:
    """Every alert's name and declared `for:`, in order (what alerts/config.yaml may override)."""
    return [(a.name, a.for_) for a in alerts(c)]


def alert_support_records(c: Config) -> list[Record]:
    """Recording rules the alerts need (rendered into the alerts file)."""
    return [r for group in ALERT_GROUPS if hasattr(group, "records") for r in group.records(c)]


def records(c: Config) -> list[Record]:
    """Recording rules for dashboards (alerts/helios-recording.yaml)."""
    return recording.records(c)


def optional_dcgm_records(c: Config) -> list[Record]:
    """The optional dcgm-exporter join (alerts/optional/helios-dcgm-recording.yaml)."""
    return dcgm.records(c)
