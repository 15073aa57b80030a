"""Make the folder's helper modules importable whatever pytest's import mode; the corpora of
rig.py for every test module here (`procs` comes from tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from rig import corpora  # noqa: E402  (after the path above)

__all__ = ["corpora"]
