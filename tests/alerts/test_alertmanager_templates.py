"""deploy/alertmanager/helios.tmpl: notifications that stay true on both edges.

Each tests/fixtures/alertmanager/<case>.json is the data Alertmanager hands a template (one
notification of one group); `amtool template render` renders it and the result must equal
tests/golden/alertmanager/<case>.txt (regenerate with `pytest --update-golden`, review the diff).
The properties below hold whatever the goldens say.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "alertmanager"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "alertmanager"
CASES = sorted(p.stem for p in FIXTURES.glob("*.json"))
TEMPLATE = '{{ template "helios.title" . }}\n{{ template "helios.text" . }}'


def render(amtool: str, root: Path, data: Path, text: str = TEMPLATE) -> str:
    result = subprocess.run(
        [amtool, "template", "render",
         f"--template.glob={root / 'deploy/alertmanager/helios.tmpl'}",
         f"--template.text={text}", f"--template.data={data}"],
        check=False, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def load(case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{case}.json").read_text(encoding="utf-8"))
    return data


def test_every_case_has_a_golden() -> None:
    assert CASES, "no fixtures"
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == CASES
    # Resolves with each kind of evidence, and without any.
    assert len([c for c in CASES if any(a["status"] == "resolved" for a in load(c)["alerts"])]) >= 5


@pytest.mark.parametrize("case", CASES)
def test_rendered_notification(case: str, amtool: str, root: Path, update_golden: bool) -> None:
    text = render(amtool, root, FIXTURES / f"{case}.json")
    path = GOLDEN / f"{case}.txt"
    if update_golden:
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def resolve_blocks(text: str) -> list[str]:
    """The paragraph of each resolved alert ("RESOLVED at ..." up to the next blank line)."""
    return [p for p in text.split("\n\n") if p.lstrip("\n").startswith("RESOLVED at")]


@pytest.mark.parametrize("case", CASES)
def test_a_resolved_alert_never_shows_its_firing_text(case: str, amtool: str, root: Path) -> None:
    """Its annotations are those of the last firing evaluation: never repeated as current."""
    text = render(amtool, root, FIXTURES / f"{case}.json")
    for alert in load(case)["alerts"]:
        if alert["status"] == "resolved":
            assert alert["annotations"]["description"] not in text
    for block in resolve_blocks(text):
        assert "still open" not in block
        assert "will be cut" not in block
        assert not re.search(r"\s-\d", block), block  # a negative time left


@pytest.mark.parametrize(
    ("case", "how"),
    [
        ("closed_late", "HeliosRestoreBoundBreached.\nRestore window on helios-exporter/h1:9400 "
                        "closed late at 2026-03-02 03:50:00 +0000 UTC."),
        ("check_verified", "A later restore passed the check: Restore window on "
                           "helios-exporter/h1:9400 closed in time at 2026-03-03 10:20:00 +0000 UTC."),
        ("forgotten", "Prometheus's memory of the window ran out while the sidecar was "
                      "unreachable. This does not mean the window closed."),
        ("redo_verified", "A later restore passed the check: Restore window on "
                          "helios-exporter/h1:9400 closed in time at 2026-03-03 10:20:00 +0000 UTC."),
        ("cutoff_resolved_without_notice", "No window-closed notice came with this resolve"),
        ("at_risk_resolved", "No longer at risk"),
    ],
)
def test_resolves_say_how(case: str, how: str, amtool: str, root: Path) -> None:
    text = render(amtool, root, FIXTURES / f"{case}.json")
    assert how in text
    title = text.split("\n", 1)[0]
    if not any(a["status"] == "firing" and a["labels"]["severity"] not in ("info", "notice")
               for a in load(case)["alerts"]):
        assert title.startswith("[RESOLVED]"), title


def test_at_risk_resolve_never_shows_time_left(amtool: str, root: Path) -> None:
    text = render(amtool, root, FIXTURES / "at_risk_resolved.json")
    assert " left" not in text


def test_a_redo_names_the_verified_restore_not_the_failed_one(amtool: str, root: Path) -> None:
    """The failed restore's notice ended as the redo's fired (one notice per window): the text
    explains the resolve with the redo alone, and the title names the resolved page only."""
    text = render(amtool, root, FIXTURES / "redo_verified.json")
    assert text.split("\n", 1)[0] == (
        "[RESOLVED] Helios helios-exporter/h1:9400: HeliosRestoreCheckFailed(container)")
    assert "10:05:00" not in text and "ENDED" not in text
