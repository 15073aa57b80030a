#!/usr/bin/env python3
"""Generate the Helios Prometheus alerting and recording rules from alerts/config.yaml.

    python alerts/generate.py            # write alerts/helios-*.yaml and docs/alerts.md tables
    python alerts/generate.py --check    # exit 1 with a diff when committed output drifted

Every selector and threshold comes from the config; nothing in the rule modules is a scattered
literal. The rule groups are in alerts/groups/ (one module per group), the PromQL and template
helpers in alerts/promql.py and alerts/templates.py, rendering in alerts/render.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alerts import config as _config
from alerts.config import Config, ConfigError, Reader
from alerts.groups import alert_support_records, alerts, declared_for, records
from alerts.render import outputs, render_alerts, render_docs, render_recording
from tools.generated import sync

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "alerts" / "config.yaml"

__all__ = [
    "Config",
    "ConfigError",
    "Reader",
    "alert_support_records",
    "alerts",
    "load_config",
    "main",
    "outputs",
    "records",
    "render_alerts",
    "render_docs",
    "render_recording",
]


def load_config(path: Path = DEFAULT_CONFIG) -> Config:
    """The config at `path`, with the `for:` of every alert the groups declare."""
    return _config.load_config(path, declared_for)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root to write into")
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff when the files drifted")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        files = {str(path): text for path, text in outputs(config, args.root).items()}
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return sync(files, args.root, args.check, "python alerts/generate.py")


if __name__ == "__main__":
    sys.exit(main())
