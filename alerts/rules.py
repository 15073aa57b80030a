"""One alerting or recording rule, before rendering.

An `Alert` is the one declaration of an alert: its group, expression, `for:`, severity, summary,
description and, when docs/interface.md promises it, what the interface says of it. The rule
files, the mixin, docs/alerts.md, the interface's alert table, the `for:` that alerts/config.yaml
may override and the tests' lists of names and severities all come from it; its runbook is
docs/runbooks/<name>.md (alerts/runbooks.py), tied to it by tests/alerts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alerts.config import Config

# In a description: the alert's `for:` as rendered (alerts/config.yaml may override the declared one).
FOR = "<for>"


@dataclass(frozen=True)
class Promise:
    """The alert's row in docs/interface.md section 5."""

    fires_when: str
    since: int = 1  # the interface version that added it


@dataclass(frozen=True)
class Alert:
    name: str
    group: str
    severity: str
    for_: str  # `for:` as a Prometheus duration; "0m" fires on the first matching evaluation
    expr: str
    summary: str
    description: str
    meaning: str  # the expression in words, for docs/alerts.md
    promised: Promise | None = None  # None: not part of the interface (docs/alerts.md says why)
    # Templated labels beside `severity`, e.g. one that tells apart the alerts of two windows.
    labels: tuple[tuple[str, str], ...] = ()

    def rule(self, config: Config) -> dict[str, Any]:
        """The rule as Prometheus reads it, without `runbook_url` (see alerts/runbooks.py)."""
        rule: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        duration = config.for_[self.name]
        if duration.seconds:
            rule["for"] = str(duration)
        rule["labels"] = {"severity": self.severity, **dict(self.labels)}
        rule["annotations"] = {"summary": self.summary,
                               "description": self.description.replace(FOR, str(duration))}
        return rule


@dataclass(frozen=True)
class Record:
    name: str
    group: str
    expr: str
    meaning: str

    def rule(self) -> dict[str, Any]:
        return {"record": self.name, "expr": self.expr}
