"""Test helpers shared by several test modules."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

from tools.harness import StubEngine, contract_example, make_sidecar

__all__ = ["StubEngine", "check_golden", "contract_example", "make_sidecar", "missing",
           "promtool_check_metrics", "tracked_copy"]

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def missing(reason: str) -> NoReturn:
    """A tool scripts/bootstrap installs is missing: a failure under CI (CI set), else a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; run scripts/bootstrap", pytrace=False)
    pytest.skip(f"{reason} (run scripts/bootstrap)")


def promtool_check_metrics(text: bytes) -> None:
    """Fail the test unless `promtool check metrics` accepts the exposition."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not on PATH (scripts/bootstrap installs Debian's prometheus)")
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          check=False, timeout=30)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()


def check_golden(text: bytes, path: Path, update: bool) -> None:
    """`text` is a valid exposition equal to the golden file (`--update-golden` rewrites it)."""
    if update:
        path.write_bytes(text)
    promtool_check_metrics(text)
    assert path.exists(), f"missing {path}: run pytest --update-golden and review the diff"
    assert text.decode() == path.read_text()


def tracked_copy(dest: Path) -> Path:
    """The tracked files of this checkout, as they are in the work tree, copied under `dest` (a
    clone that also holds uncommitted edits); skips outside a git checkout."""
    root = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None:
        missing("git not on PATH")
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                            check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no tracked files to copy")
    for name in listed.stdout.decode().split("\0"):
        source = root / name
        if name and source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run_generate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`scripts/generate *argv` (tools/generate.py, the one entry of every generator) in this
    process: its exit status, stdout (the diffs) and stderr (what it says)."""
    from tools import generate

    capsys.readouterr()
    status = generate.main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err
