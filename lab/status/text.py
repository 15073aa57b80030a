"""The report as plain text for a terminal (`helios-exporter status`).

Readable without colour: every state is a word ("FAILED", "ok", "unknown"). With `color` the
words are coloured too (ANSI SGR), never instead. Tables are columns when they fit the width and
one record per block when they do not (an image digest alone is 71 characters).
"""

from __future__ import annotations

from typing import Final

from exporter.oncall.model import (
    At,
    Block,
    Cell,
    Code,
    Fields,
    Link,
    Para,
    Piece,
    Report,
    Since,
    Steps,
    Table,
    Until,
    Word,
    since,
    spaced,
    until,
    utc,
)

SGR: Final = {"bad": "1;31", "good": "32", "warn": "1;33", "neutral": "", "title": "1"}
INDENT: Final = "  "
GAP: Final = "  "
LAST_COLUMN: Final = 16  # columns a table's last column needs, at least, to stay a table


def sgr(text: str, style: str, color: bool) -> str:
    code = SGR.get(style, "")
    return f"\x1b[{code}m{text}\x1b[0m" if color and code and text else text


def _piece(piece: Piece) -> str:
    if isinstance(piece, str):
        return piece
    if isinstance(piece, Word):
        return piece.text
    if isinstance(piece, At):
        return utc(piece.epoch)
    if isinstance(piece, Until):
        return until(piece.seconds)
    if isinstance(piece, Since):
        return since(piece.seconds)
    if isinstance(piece, Code | Link):
        return piece.text
    raise TypeError(piece)


def cell(value: Cell, color: bool = False) -> tuple[str, str]:
    """(plain text, text to print): equal without colour; the plain one measures width."""
    plain, styled = [], []
    for sep, piece in spaced(value):
        text = _piece(piece)
        plain.append(sep + text)
        tone = piece.tone if isinstance(piece, Word) else ""
        styled.append(sep + sgr(text, tone, color))
    return "".join(plain), "".join(styled)


def wrap(value: Cell, width: int, first: str, rest: str, color: bool = False) -> list[str]:
    """The cell as lines of at most `width` characters where words allow: prose breaks between
    words; a status word, a time, an identifier is never broken (a line may run over for one)."""
    tokens: list[tuple[str, str, str]] = []  # (separator, plain, styled)
    for sep, piece in spaced(value):
        if isinstance(piece, str):
            for i, word in enumerate(piece.split()):
                tokens.append((sep if i == 0 else " ", word, word))
        else:
            plain, styled = cell((piece,), color)
            tokens.append((sep, plain, styled))
    lines: list[str] = []
    styled_line, used, empty = first, len(first), True
    for sep, plain, styled in tokens:
        # Break only where a space would go (never before glued punctuation).
        if not empty and sep and used + len(sep) + len(plain) > width:
            lines.append(styled_line)
            styled_line, used, empty = rest, len(rest), True
        gap = "" if empty else sep
        styled_line += gap + styled
        used += len(gap) + len(plain)
        empty = False
    lines.append(styled_line)
    return lines


def render(rep: Report, width: int = 100, color: bool = False) -> str:
    """The whole report; `width` decides whether tables fit as columns."""
    lines: list[str] = [sgr("Helios restore status", "title", color)]
    if rep.engine_url:
        lines.append(f"engine {rep.engine_url}")
    lines.append(f"as of {utc(rep.as_of)}")
    lines.append("")
    word = Word(rep.headline, rep.tone)
    lines.append(sgr("SUMMARY: ", "title", color) + cell((word,), color)[1])
    for line in rep.summary:
        lines.extend(wrap(line, width, INDENT + "* ", INDENT + "  ", color))
    for section in rep.sections:
        lines.append("")
        lines.append(sgr(section.title.upper(), "title", color))
        for block in section.blocks:
            lines.extend(_block(block, width, color))
    return "\n".join(lines) + "\n"


def _block(block: Block, width: int, color: bool) -> list[str]:
    if isinstance(block, Para):
        return wrap(block.cell, width, INDENT, INDENT, color)
    if isinstance(block, Steps):
        return [line for i, c in enumerate(block.items, 1)
                for line in wrap(c, width, f"{INDENT}{i}. ", INDENT + "   ", color)]
    if isinstance(block, Fields):
        label_width = max((len(label) for label, _ in block.rows), default=0)
        hang = " " * (len(INDENT) + label_width + len(GAP))
        return [line for label, value in block.rows
                for line in wrap(value, width, f"{INDENT}{label.ljust(label_width)}{GAP}", hang,
                                 color)]
    return _table(block, width, color)


def _table(table: Table, width: int, color: bool) -> list[str]:
    out = [f"{INDENT}{table.caption}:"]
    if not table.rows:
        return [f"{INDENT}{table.caption}: {table.empty}"]
    cells = [[cell(c, color) for c in row] for row in table.rows]
    widths = [max([len(h)] + [len(row[i][0]) for row in cells if i < len(row)])
              for i, h in enumerate(table.columns)]
    # Columns when all but the last fit with room to spare: the last (free text) may run on.
    fixed = len(INDENT) * 2 + sum(widths[:-1]) + len(GAP) * (len(widths) - 1)
    if fixed + min(widths[-1], LAST_COLUMN) <= width:
        header = GAP.join(h.ljust(w) for h, w in zip(table.columns, widths, strict=False))
        out.append(INDENT * 2 + header.rstrip())
        for row in cells:
            text = GAP.join(styled + " " * (w - len(plain))
                            for (plain, styled), w in zip(row, widths, strict=False))
            out.append(INDENT * 2 + text.rstrip())
        return out
    # Too wide: one block per record, its first cell as the heading.
    label_width = max(len(h) for h in table.columns[1:])
    for row in cells:
        out.append(INDENT * 2 + row[0][1])
        for header, (plain, styled) in zip(table.columns[1:], row[1:], strict=False):
            if plain:
                out.append(f"{INDENT * 3}{header.ljust(label_width)}{GAP}{styled}")
    return out
