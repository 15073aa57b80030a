"""The Helios Prometheus alerting and recording rules from alerts/config.yaml: what
`scripts/generate alerts` writes (alerts/helios-*.yaml, the alertmanager fragment and the
generated tables of docs/alerts.md and the runbooks).

Every selector and threshold comes from the config; nothing in the rule modules is a scattered
literal. The rule groups are in alerts/groups/ (one module per group), the PromQL and template
helpers in alerts/promql.py and alerts/templates.py, rendering in alerts/render.py.
"""

from __future__ import annotations

from pathlib import Path

from alerts import config as _config
from alerts.config import Config, ConfigError, Reader
from alerts.groups import alert_support_records, alerts, declared_for, records
from alerts.render import outputs, render_alerts, render_docs, render_recording

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "alerts" / "config.yaml"

__all__ = [
    "Config",
    "ConfigError",
    "Reader",
    "alert_support_records",
    "alerts",
    "load_config",
    "outputs",
    "records",
    "render_alerts",
    "render_docs",
    "render_recording",
]


def load_config(path: Path = DEFAULT_CONFIG) -> Config:
    """The config at `path`, with the `for:` of every alert the groups declare."""
    return _config.load_config(path, declared_for)
