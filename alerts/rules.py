"""One alerting or recording rule, before rendering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alerts.config import Config


@dataclass(frozen=True)
class Alert:
    name: str
    group: str
    severity: str
    expr: str
    summary: str
    description: str
    meaning: str  # the expression in words, for docs/alerts.md
    # Templated labels beside `severity`, e.g. one that tells apart the alerts of two windows.
    labels: tuple[tuple[str, str], ...] = ()

    def rule(self, config: Config) -> dict[str, Any]:
        """The rule as Prometheus reads it, without `runbook_url` (see alerts/runbooks.py)."""
        rule: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        duration = config.for_[self.name]
        if duration.seconds:
            rule["for"] = str(duration)
        rule["labels"] = {"severity": self.severity, **dict(self.labels)}
        rule["annotations"] = {"summary": self.summary, "description": self.description}
        return rule


@dataclass(frozen=True)
class Record:
    name: str
    group: str
    expr: str
    meaning: str

    def rule(self) -> dict[str, Any]:
        return {"record": self.name, "expr": self.expr}
