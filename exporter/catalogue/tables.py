"""The catalogue as markdown: the README's metrics table and the metric tables of
docs/interface.md section 4, each between its markers (`scripts/generate metrics` writes them).

    <!-- BEGIN GENERATED: metrics ... -->               README.md: every family
    <!-- BEGIN GENERATED: interface-metrics-4.1 ... --> docs/interface.md: the families that
                                                        section promises, *(vN)* after a name
                                                        added by interface version N > 1
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.catalogue import FAMILIES
from exporter.catalogue.model import Family

# The last column of each section's table in docs/interface.md.
SECTION_COLUMN = {
    "4.1": "from the snapshot",
    "4.2": "meaning",
    "4.3": "when present",
    "4.4": "from NVML",
    "4.5": "meaning",
}


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(f: Family) -> str:
    return f.type or f.unit  # an open row's unit says whose types its families have


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["|" + "".join(f" {cell(c)} |" if c else " |" for c in row) for row in rows]
    return "\n".join(lines)


def _promise(f: Family) -> str:
    if f.promised is None:
        return ""
    since = f" (v{f.promised.since})" if f.promised.since > 1 else ""
    return f"{f.promised.section}{since}"


def readme_table(families: Iterable[Family] = FAMILIES) -> str:
    """Every family in exposition order, with what docs/interface.md promises of it."""
    return _table(
        ("metric", "type", "labels", "unit", "source", "docs/interface.md"),
        ((f"`{f.name}`", _type(f), f.labels_text, "" if f.open else f.unit, f.source_text,
          _promise(f)) for f in families))


def sections(families: Iterable[Family] = FAMILIES) -> list[str]:
    """The sections of docs/interface.md that promise families, in order."""
    return sorted({f.promised.section for f in families if f.promised is not None})


def interface_table(section: str, families: Iterable[Family] = FAMILIES) -> str:
    rows = []
    for f in families:
        if f.promised is None or f.promised.section != section:
            continue
        since = f" *(v{f.promised.since})*" if f.promised.since > 1 else ""
        rows.append((f"`{f.name}`{since}", _type(f), f.labels_text, f.source_text))
    return _table(("metric", "type", "labels", SECTION_COLUMN[section]), rows)
