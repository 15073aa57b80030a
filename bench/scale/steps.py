"""The history of the rules' steps, for a backfilled Prometheus (bench/scale/scale.py).

Some recorded series keep one sample per 5 minutes and are read back over hours: the restore
memory (alerts/groups/restore_memory.py) and the host-tier growth (alerts/groups/offload.py).
A step rule records its source only where its own last step is older than 4m50s:

    (
      <source>
    )
    unless
    (
      last_over_time(<record>{...}[4m50s])
    )

A Prometheus started on backfilled blocks has none of that history, so its rules would read a
few minutes of steps where a Prometheus that has run for hours reads three hours of them. The
bench backfills them with `promtool tsdb create-blocks-from rules`, evaluating each step rule's
source (through the recording rule it reads, where it reads one) every 5 minutes over the range
the rules read back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from exporter import durations

STEP_RE = re.compile(
    r"\(\n(?P<source>.*)\n\)\nunless\n\(\n\s*last_over_time\((?P<self>[\w:]+)\{[^}]*\}"
    r"\[[^\]]+\]\)\n\)", re.S)
SELECTOR_RE = re.compile(r"^(?P<name>[\w:]+)(?:\{[^}]*\})?$")
RANGE_RE = re.compile(r"([\w:]+)\{[^}]*\}\[(\d+[smhdw](?:\d+[smhdw])*)\]")


@dataclass(frozen=True)
class Steps:
    rules: list[dict[str, str]]  # {record, expr}: what each step holds, from raw series
    reach_s: float  # the longest range any rule reads over a step record


def _records(rule_files: Iterable[Path]) -> list[dict[str, Any]]:
    return [rule for path in rule_files
            for group in (yaml.safe_load(path.read_text()) or {}).get("groups", [])
            for rule in group.get("rules", [])]


def find(rule_files: Iterable[Path]) -> Steps:
    rules = _records(rule_files)
    recorded = {r["record"]: r["expr"] for r in rules if "record" in r}
    out: list[dict[str, str]] = []
    for name, expr in recorded.items():
        m = STEP_RE.fullmatch(expr.strip())
        if m is None or m["self"] != name:
            continue
        source = m["source"].strip()
        sel = SELECTOR_RE.match(source)
        if sel is not None and sel["name"] in recorded:
            source = recorded[sel["name"]]
        out.append({"record": name, "expr": source})
    names = {r["record"] for r in out}
    reach = max((durations.seconds(window) for r in rules for metric, window in RANGE_RE.findall(r["expr"])
                 if metric in names), default=0.0)
    return Steps(out, reach)


def rules_file(steps: Steps, interval: str, path: Path) -> None:
    """A rule file for promtool: the step sources, evaluated every `interval`."""
    doc = {"groups": [{"name": "backfilled-steps", "interval": interval, "rules": steps.rules}]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
