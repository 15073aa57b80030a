"""Write generated files, or with `check` report their drift from the committed copies."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from pathlib import Path


def sync(files: Mapping[str, str], root: Path, check: bool, regenerate: str) -> int:
    """Exit status: 0 in sync (or written), 1 when `check` found drift (diff on stdout)."""
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
    if drifted:
        print(f"\n{drifted} generated file(s) drifted; run `{regenerate}`", file=sys.stderr)
        return 1
    return 0
