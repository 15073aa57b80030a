"""The corpora of rig.py for every test module here (`procs` comes from tests/conftest.py)."""

from __future__ import annotations

from tests.lab.rig import corpora

__all__ = ["corpora"]
