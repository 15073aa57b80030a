"""The Helios Grafana dashboards (grafana-foundation-sdk) as JSON: what
`scripts/generate dashboards` writes (dashboards/helios-*.json).

Each carries grafana.com's import metadata (dashboards/grafana_com.py). Thresholds shared with
the alerts (restore at-risk margin, page headroom, GPU power limit ratio,
the window memory of last_over_time) are read from alerts/config.yaml: regenerate both after
changing it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as db

from dashboards import gpu, offload, restore
from dashboards.grafana_com import grafana_version, with_import_metadata
from dashboards.lib import ALERTS_CONFIG, Settings, render

# file name -> builder; the file names and uids are stable (links and provisioning use them).
DASHBOARDS: dict[str, Callable[[Settings], db.Dashboard]] = {
    restore.FILE: restore.build,
    offload.FILE: offload.build,
    gpu.FILE: gpu.build,
}


def generate(config: Path = ALERTS_CONFIG) -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    settings = Settings.load(config)
    version = grafana_version()
    return {name: with_import_metadata(render(build(settings)), version)
            for name, build in DASHBOARDS.items()}

