"""The one writer of a report's documents, for `evidence` (lab/evidence/report.py's EVIDENCE) and
`observer-cost` (lab/observer_cost/report.py's OBSERVER_COST): the JSON document, its picture
when matplotlib is installed (the plot extra), and the markdown that shows the picture or says
why there is none.

A report names its picture by a function that imports it (`draw`), so that the picture's module,
which reads the document's own module, is imported only here and only when drawn: nothing below
a report imports back up into it (tests/repo/test_imports.py: no import cycle).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.probe.record import write_json

Doc = Mapping[str, Any]
Picture = Callable[[Doc, Path], None]


@dataclass(frozen=True)
class Report:
    json_file: str
    picture_file: str
    markdown_file: str
    # the markdown of a document: (doc, the picture's file or None, why there is none or None)
    markdown: Callable[[Doc, str | None, str | None], str]
    draw: Callable[[], Picture]  # imports the picture's module: ImportError without matplotlib
    picture_missing: str  # what the markdown and the command say without matplotlib
    sort_keys: bool = False  # the JSON's keys sorted (evidence.json) or as built


def write(doc: Doc, out: Path, report: Report) -> tuple[list[Path], str | None]:
    """Write the JSON, the picture (when it can be drawn) and the markdown into `out`; the paths
    written and why there is no picture (None: there is one)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / report.json_file
    write_json(path, doc, sort_keys=report.sort_keys)
    written = [path]
    missing = None
    try:
        picture = report.draw()
    except ImportError:
        missing = report.picture_missing
    else:
        path = out / report.picture_file
        picture(doc, path)
        written.append(path)
    path = out / report.markdown_file
    path.write_text(report.markdown(doc, None if missing else report.picture_file, missing))
    written.append(path)
    return written, missing
