"""What docs/interface.md has promised stays promised.

The interface's metric and alert tables are generated from the metric catalogue and the alert
declarations, so a rename there would rename the promise without a word. This test holds them to
tests/fixtures/interface/promised.txt, the promises as they stand: every name listed keeps its
row, its type or severity, its section and the version that added it. A new promise needs no
line; changing a line is the deliberate act of a new interface version.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from alerts import groups
from alerts.generate import load_config
from alerts.rules import Alert
from exporter import catalogue

LEDGER = Path(__file__).parents[1] / "fixtures" / "interface" / "promised.txt"


@cache
def declared() -> dict[str, Alert]:
    return {a.name: a for a in groups.alerts(load_config())}


def ledger() -> list[tuple[str, str, str, str, int]]:
    rows = []
    for line in LEDGER.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, name, what, section, since = line.split()
            rows.append((kind, name, what, section, int(since.removeprefix("v"))))
    return rows


def test_the_ledger_lists_metrics_and_alerts_of_every_version() -> None:
    rows = ledger()
    assert {kind for kind, *_ in rows} == {"metric", "alert"}
    assert {since for *_, since in rows} == {1, 2, 3}


@pytest.mark.parametrize("promise", ledger(), ids=lambda p: p[1])
def test_a_promise_is_kept(promise: tuple[str, str, str, str, int]) -> None:
    kind, name, what, section, since = promise
    if kind == "metric":
        row = catalogue.get(name)
        assert row.promised is not None, f"{name} is no longer promised"
        assert (row.type or "open", row.promised.section, row.promised.since) == (
            what, section, since)
    else:
        assert name in declared(), f"{name} is no longer declared"
        alert = declared()[name]
        assert alert.promised is not None, f"{name} is no longer promised"
        assert (alert.severity, alert.promised.since) == (what, since)
