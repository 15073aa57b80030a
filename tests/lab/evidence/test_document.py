"""lab/evidence/document.py: the one writer of the evidence and observer-cost documents (the JSON, the
picture when matplotlib is there, the markdown that shows it or says why not)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from lab.evidence import document, report
from lab.observer_cost import report as observer_cost_report

DOC = {"b": 1, "a": [1.5, None], "simulated": True}


def _markdown(doc: Any, picture: str | None, missing: str | None) -> str:
    return f"picture={picture} missing={missing} keys={','.join(doc)}\n"


def _drawn(doc: Any, path: Path) -> None:
    path.write_bytes(b"PNG " + json.dumps(doc, sort_keys=True).encode())


def _no_matplotlib() -> document.Picture:
    raise ImportError("No module named 'matplotlib'")


def test_writes_the_json_the_picture_and_the_markdown_that_shows_it(tmp_path: Path) -> None:
    kind = document.Report("d.json", "d.png", "d.md", _markdown, lambda: _drawn, "no picture")
    written, missing = document.write(DOC, tmp_path / "out", kind)
    out = tmp_path / "out"
    assert missing is None
    assert written == [out / "d.json", out / "d.png", out / "d.md"]
    assert (out / "d.json").read_text() == json.dumps(DOC, indent=1) + "\n"  # as built
    assert (out / "d.png").read_bytes().startswith(b"PNG ")
    assert (out / "d.md").read_text() == "picture=d.png missing=None keys=b,a,simulated\n"
    assert sorted(p.name for p in out.iterdir()) == ["d.json", "d.md", "d.png"]  # no temporary


def test_without_the_picture_the_markdown_says_why(tmp_path: Path) -> None:
    kind = document.Report("d.json", "d.png", "d.md", _markdown, _no_matplotlib, "no picture: why",
                           sort_keys=True)
    written, missing = document.write(DOC, tmp_path, kind)
    assert missing == "no picture: why"
    assert [p.name for p in written] == ["d.json", "d.md"]
    assert not (tmp_path / "d.png").exists()
    assert (tmp_path / "d.json").read_text() == json.dumps(DOC, indent=1, sort_keys=True) + "\n"
    assert (tmp_path / "d.md").read_text() == "picture=None missing=no picture: why keys=b,a,simulated\n"


def test_the_json_is_created_as_open_would_create_it(tmp_path: Path) -> None:
    """The umask's permissions (as evidence.json always had), not a temporary file's 0600."""
    old = os.umask(0o022)
    try:
        document.write(DOC, tmp_path, document.Report("d.json", "d.png", "d.md", _markdown,
                                                      _no_matplotlib, "-"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "d.json").stat().st_mode) == 0o644


def test_both_reports_are_written_by_it() -> None:
    """evidence and observer-cost name their files and picture here, and nothing else writes
    them: their modules keep no writer of their own."""
    assert (report.EVIDENCE.json_file, report.EVIDENCE.picture_file,
            report.EVIDENCE.markdown_file, report.EVIDENCE.sort_keys) == (
        "evidence.json", "evidence.png", "evidence.md", True)
    oc = observer_cost_report.OBSERVER_COST
    assert (oc.json_file, oc.picture_file, oc.markdown_file, oc.sort_keys) == (
        "observer-cost.json", "observer-cost.png", "observer-cost.md", False)
    from lab.evidence import doc as evidence
    assert not hasattr(evidence, "write") and not hasattr(observer_cost_report, "write")
    assert report.EVIDENCE.draw().__module__ == "lab.evidence.plot"  # matplotlib is in the test extra
    assert oc.draw().__module__ == "lab.observer_cost.plot"
