"""Make the folder's helper modules importable whatever pytest's import mode; the real-process
fixtures of rig.py for every test module here."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from rig import corpora, procs  # noqa: E402  (after the path above)

__all__ = ["corpora", "procs"]
