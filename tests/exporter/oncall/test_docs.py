"""The runbooks point to the status page and the terminal view; the page's doc shows its pictures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

RUNBOOKS = sorted((ROOT / "docs" / "runbooks").glob("*.md"))


@pytest.mark.parametrize("runbook", RUNBOOKS, ids=[p.stem for p in RUNBOOKS])
def test_every_runbook_says_where_to_see_it(runbook: Path) -> None:
    """In the generated Set up section, with the address its blocks set (tests/repo/runbooks runs the
    commands: the CLI parses them and --sidecar is the sidecar's address there): on the common
    set-up page (README.md), which every runbook's Set up section links to."""
    text = runbook.read_text()
    if runbook.name != "README.md":
        setup = text[text.index("<!-- BEGIN GENERATED: setup"):text.index("<!-- END GENERATED: setup")]
        assert "(README.md#set-up)" in setup and "where to see the\nsidecar's status" in setup
        text = (runbook.parent / "README.md").read_text()
    setup = text[text.index("<!-- BEGIN GENERATED: setup"):text.index("<!-- END GENERATED: setup")]
    line = next((ln for ln in setup.splitlines() if ln.startswith("**See it:**")), None)
    assert line is not None, f"{runbook.name} has no **See it:** line in its Set up section"
    assert "(../status-page.md)" in line
    assert "`$SIDECAR/` in a browser" in setup
    assert 'helios-exporter status --sidecar "$SIDECAR" --watch' in setup


def test_the_status_page_doc_shows_its_pictures() -> None:
    doc = (ROOT / "docs" / "status-page.md").read_text()
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", doc)
    assert len(pictures) == 4
    for picture in pictures:
        assert (ROOT / "docs" / picture).is_file(), picture
    assert "(docs/status-page.md)" in (ROOT / "README.md").read_text()
