"""Runbook links, added to every alert in one place (kubernetes-mixin's add-runbook-links)."""

from __future__ import annotations

from typing import Any

from alerts.config import Config

RUNBOOK_DIR = "docs/runbooks"


def runbook_url(config: Config, alert: str) -> str:
    return f"{config.runbook_base_url}/{alert}.md"


def docs_link(alert: str) -> str:
    """The runbook relative to docs/alerts.md."""
    return f"runbooks/{alert}.md"


def add_runbook_link(rule: dict[str, Any], config: Config) -> dict[str, Any]:
    """The alerting rule with `runbook_url` as its last annotation."""
    annotations = {**rule["annotations"], "runbook_url": runbook_url(config, rule["alert"])}
    return {**rule, "annotations": annotations}
