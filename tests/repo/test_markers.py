"""The `e2e` marker means "starts a process" (tests/process_guard.py): an unmarked test that
starts one fails, a test that uses a process fixture is marked without saying so, and a
fixture name declared as starting processes means that everywhere."""

from __future__ import annotations

import ast
import collections
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

CONFTEST = """
from tests.process_guard import (process_fixture, pytest_collection_modifyitems,
                                 pytest_runtest_call, pytest_runtest_setup)

@process_fixture
def child():
    return "true"
"""

TESTS = """
import subprocess
import pytest

def test_unit():
    assert 1 + 1 == 2

def test_unmarked_spawn():
    subprocess.run(["true"], check=True)

@pytest.mark.e2e
def test_marked_spawn():
    subprocess.run(["true"], check=True)

def test_through_the_fixture(child):
    subprocess.run([child], check=True)
"""


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_sample.py").write_text(TESTS)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-p", "no:randomly", "--rootdir", str(tmp_path), "-o", "markers=e2e: starts a process",
         str(tmp_path), *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.e2e
def test_an_unmarked_test_that_starts_a_process_fails_and_says_what_it_started(
        tmp_path: Path) -> None:
    done = _pytest(tmp_path, "-rf")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 failed, 3 passed" in out
    assert "test_sample.py::test_unmarked_spawn starts a process but is not marked e2e" in out
    assert "subprocess.Popen(['true'])" in out


@pytest.mark.e2e
def test_not_e2e_is_the_run_that_starts_nothing(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "-m", "not e2e")
    out = done.stdout + done.stderr
    # the fixture's user is deselected with the marked test: marked through the fixture
    assert "1 failed, 1 passed, 2 deselected" in out, out


def test_a_process_fixture_name_means_one_thing() -> None:
    """Tests are marked by fixture name: a name declared with @process_fixture is never also a
    plain fixture somewhere else (its users there would be marked for nothing)."""
    kinds: dict[str, set[str]] = collections.defaultdict(set)
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for dec in map(ast.unparse, node.decorator_list):
                    if dec.startswith("process_fixture"):
                        kinds[node.name].add("process")
                    elif dec.startswith(("pytest.fixture", "fixture")):
                        kinds[node.name].add("plain")
    assert {name for name, k in kinds.items() if k == {"process", "plain"}} == set()
    assert {"procs", "stack", "promtool"} <= {n for n, k in kinds.items() if k == {"process"}}


@pytest.mark.e2e
@pytest.mark.parametrize(("folder", "marker"), [("e2e", "e2e"), ("hostile", "hostile")])
def test_the_marked_suites_mark_every_test_in_them(folder: str, marker: str) -> None:
    """tests/e2e/ and tests/hostile/ are marked suites: their conftest.py marks every test under
    them (tests/README.md), so deselecting the marker leaves none of theirs."""
    def collected(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             "-p", "no:xdist", str(ROOT / "tests" / folder), *args],
            capture_output=True, text=True, timeout=240, check=False, cwd=ROOT)
        return done.stdout.strip().splitlines()[-1]

    everything = collected()
    assert re.fullmatch(r"(\d+) tests? collected.*", everything), everything
    total = int(everything.split()[0])
    rest = collected("-m", f"not {marker}")
    assert rest.startswith(f"no tests collected ({total} deselected)"), rest
