"""No module over 400 lines (small modules with one job; issue 34): every .py of the repository,
the packages, bench/, tools/ and tests alike, hidden folders (.venv, .git) left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.conftest import ROOT

LIMIT = 400


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
    return [f"{name}: {lines} lines, more than {LIMIT}: split it by job"
            for name, lines in sorted(counts.items()) if lines > LIMIT]


def test_no_module_over_400_lines() -> None:
    counts = line_counts(ROOT)
    assert "exporter/snapshot.py" in counts and "bench/report/report.py" in counts
    assert "tests/repo/test_sizes.py" in counts
    assert not any(name.startswith(".venv/") for name in counts)
    problems = size_problems(counts)
    assert problems == [], "\n".join(problems)


def test_the_size_check_names_what_is_wrong(tmp_path: Path) -> None:
    """The check can fail: a file over the limit is named, one at it is not; hidden folders are
    not read."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * 401)
    (tmp_path / "pkg" / "fine.py").write_text("x = 1\n" * 400)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "site.py").write_text("x = 1\n" * 900)
    counts = line_counts(tmp_path)
    assert counts == {"pkg/big.py": 401, "pkg/fine.py": 400}
    assert size_problems(counts) == ["pkg/big.py: 401 lines, more than 400: split it by job"]
