"""grafana.com import metadata: `__inputs` and `__requires`, as Grafana's "Export for sharing
externally" writes them, for the Grafana the Compose example runs (deploy/compose).

The dashboards pick their Prometheus through their own `datasource` variable, so an import asks
for nothing (`__inputs` is empty); `__requires` names the Grafana version and the plugins used.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

COMPOSE = Path(__file__).resolve().parent.parent / "deploy" / "compose" / "docker-compose.yaml"
# Grafana's core panel plugins (their display names in an export).
PANEL_NAMES = {"stat": "Stat", "timeseries": "Time series", "table": "Table",
               "state-timeline": "State timeline", "text": "Text", "gauge": "Gauge",
               "bargauge": "Bar gauge", "heatmap": "Heatmap"}


def grafana_version(compose: Path = COMPOSE) -> str:
    """The version of the grafana/grafana image deploy/compose runs."""
    match = re.search(r"image:\s*grafana/grafana:(\d+\.\d+\.\d+)", compose.read_text(encoding="utf-8"))
    if match is None:
        raise ValueError(f"{compose}: no grafana/grafana:<version> image")
    return match.group(1)


def _panel_types(panels: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for panel in panels:
        if panel.get("type") != "row":
            found.add(str(panel["type"]))
        found |= _panel_types(panel.get("panels", []))
    return found


def with_import_metadata(text: str, version: str) -> str:
    """The dashboard's JSON text (as dashboards/lib.py renders it) with the metadata added."""
    data = json.loads(text)
    data["__inputs"] = []
    data["__requires"] = [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": version},
        {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
        *({"type": "panel", "id": p, "name": PANEL_NAMES.get(p, p), "version": ""}
          for p in sorted(_panel_types(data.get("panels", [])))),
    ]
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
