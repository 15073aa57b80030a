"""Modules over 400 lines are named, not failed: a module is split by job, and its size is a
hint that it may hold more than one (every .py of the repository, the packages, bench/, tools/
and tests alike, hidden folders (.venv, .git) left out). Each one is a `SizeWarning` in pytest's
warnings summary.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.conftest import ROOT

LIMIT = 400


class SizeWarning(UserWarning):
    """A module over LIMIT lines: look whether it holds more than one job."""


def line_counts(root: Path) -> dict[str, int]:
    """Lines of every .py under `root` (as `wc -l` counts them), by path relative to it."""
    counts = {}
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts[:-1]):
            continue
        counts[relative.as_posix()] = len(path.read_bytes().splitlines())
    return counts


def size_problems(counts: Mapping[str, int]) -> list[str]:
    """Each file over LIMIT lines, named with its count."""
    return [f"{name}: {lines} lines, more than {LIMIT}: does it hold more than one job?"
            for name, lines in sorted(counts.items()) if lines > LIMIT]


def warn_sizes(counts: Mapping[str, int]) -> list[str]:
    """A SizeWarning naming each file over LIMIT lines; the problems warned of."""
    problems = size_problems(counts)
    for problem in problems:
        warnings.warn(problem, SizeWarning, stacklevel=2)
    return problems


def test_modules_over_400_lines_are_named() -> None:
    counts = line_counts(ROOT)
    assert "exporter/__init__.py" in counts and "tools/harness.py" in counts
    assert "tests/repo/test_sizes.py" in counts
    assert not any(name.startswith(".venv/") for name in counts)
    warn_sizes(counts)


def test_the_size_check_names_what_is_wrong(tmp_path: Path) -> None:
    """The check can warn: a file over the limit is named, one at it is not; hidden folders are
    not read; a large file warns and fails nothing."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * 401)
    (tmp_path / "pkg" / "fine.py").write_text("x = 1\n" * 400)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "site.py").write_text("x = 1\n" * 900)
    counts = line_counts(tmp_path)
    assert counts == {"pkg/big.py": 401, "pkg/fine.py": 400}
    with pytest.warns(SizeWarning) as warned:
        problems = warn_sizes(counts)
    assert problems == ["pkg/big.py: 401 lines, more than 400: does it hold more than one job?"]
    assert [str(w.message) for w in warned] == problems
