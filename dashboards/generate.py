#!/usr/bin/env python3
"""Generate the Helios Grafana dashboards (grafana-foundation-sdk) as JSON.

    python dashboards/generate.py            # write dashboards/helios-*.json
    python dashboards/generate.py --check    # exit 1 with a diff when committed JSON drifted

Each carries grafana.com's import metadata (dashboards/grafana_com.py). Thresholds shared with
the alerts (restore at-risk margin, page headroom, GPU power limit ratio,
the window memory of last_over_time) are read from alerts/config.yaml: regenerate both after
changing it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `dashboards` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grafana_foundation_sdk.builders import dashboard as db

from dashboards import gpu, offload, restore
from dashboards.grafana_com import grafana_version, with_import_metadata
from dashboards.lib import ALERTS_CONFIG, Settings, render
from tools.generated import sync

OUT_DIR = Path(__file__).resolve().parent

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 with a diff when the committed JSON differs from the generator")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="directory of the JSON files")
    parser.add_argument("--config", type=Path, default=ALERTS_CONFIG,
                        help="alerts config holding the shared thresholds")
    args = parser.parse_args(argv)
    return sync(generate(args.config), args.out, args.check, "python dashboards/generate.py")


if __name__ == "__main__":
    sys.exit(main())
