"""Write generated files, or with `check` report their drift from the committed copies; and put
a generated section between its markers in a hand-written page. tools/generate.py runs every
generator of the repository through these."""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Mapping
from pathlib import Path


def sync(files: Mapping[str, str], root: Path, check: bool, regenerate: str = "") -> int:
    """Exit status: 0 in sync (or written), 1 when `check` found drift (diff on stdout, and on
    stderr the command to run, when `regenerate` names it)."""
    drifted = 0
    for rel, text in files.items():
        path = root / rel
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            continue
        if check:
            drifted += 1
            sys.stdout.writelines(
                difflib.unified_diff(
                    current.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    f"{rel} (committed)",
                    f"{rel} (generated)",
                )
            )
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    sys.stdout.flush()
    if drifted and regenerate:
        print(f"\n{drifted} generated file(s) drifted; run `{regenerate}`", file=sys.stderr)
    return 1 if drifted else 0


def splice(text: str, name: str, body: str, where: str) -> str:
    """`text` with the lines between `<!-- BEGIN GENERATED: name ... -->` and
    `<!-- END GENERATED: name -->` replaced by `body`; ValueError naming `where` when the markers
    are missing."""
    pattern = re.compile(rf"(<!-- BEGIN GENERATED: {re.escape(name)}\b[^\n]*-->\n).*?"
                         rf"(<!-- END GENERATED: {re.escape(name)} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"{where}: no <!-- BEGIN GENERATED: {name} --> ... "
                         f"<!-- END GENERATED: {name} --> markers")
    return pattern.sub(lambda m: m.group(1) + body.rstrip("\n") + "\n" + m.group(2), text, count=1)
