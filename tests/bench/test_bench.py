"""The bench/ scripts: each answers --help; bench/regression.py's judgement (scripts/test runs the
benchmark itself) keeps margins an order of magnitude wide, and each figure alone can fail it."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def regression() -> Any:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("regression")
    finally:
        sys.path.remove(str(ROOT / "bench"))


def figures(ratio_1: float, ratio_8: float, cycle_ms: float) -> dict[str, Any]:
    def point(ratio: float) -> dict[str, float]:
        return {"ratio": ratio, "sidecar_rps": ratio * 150.0, "node_rps": 150.0}

    return {"throughput": {1: point(ratio_1), 8: point(ratio_8)}, "cycle_cpu_median_ms": cycle_ms}


def test_the_margins_are_wide_and_below_the_goals(regression: Any) -> None:
    assert regression.GOALS["throughput"] >= regression.THROUGHPUT_FLOOR * 3
    assert regression.CYCLE_FACTOR >= 5
    assert regression.CLIENTS == (1, 8)  # Prometheus scrapes on one keep-alive connection


def test_figures_within_the_margins_pass(regression: Any) -> None:
    assert regression.judge(figures(30.0, 35.0, 2.8)) == []
    assert regression.judge(figures(3.0, 3.0, 25.0)) == []


@pytest.mark.parametrize(("args", "needle"), [
    ((0.2, 30.0, 2.8), "1 keep-alive connection(s): 0.2x"),  # the lost TCP_NODELAY, measured
    ((30.0, 1.1, 2.8), "8 keep-alive connection(s): 1.1x"),
    ((30.0, 30.0, 25.1), "poll cycle CPU median 25.10 ms"),
])
def test_each_figure_alone_fails_it(regression: Any, args: tuple[float, float, float],
                                    needle: str) -> None:
    (line,) = regression.judge(figures(*args))
    assert needle in line


SCRIPTS = sorted(p.relative_to(ROOT / "bench").as_posix() for p in (ROOT / "bench").rglob("*.py")
                 if "__main__" in p.read_text())


def test_every_bench_script_is_listed() -> None:
    assert {"regression.py", "report/report.py", "scale/scale.py", "scrape_load.py", "poll_cost.py",
            "suite.py"} <= set(SCRIPTS)


@pytest.mark.e2e
@pytest.mark.parametrize("script", SCRIPTS)
def test_every_bench_script_answers_help(script: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--help"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and not done.stderr


def test_the_committed_page_is_its_raw_figures_rendered() -> None:
    """docs/benchmarks.md is bench/report/report.py's rendering of bench/results/latest.json (and the
    stored scale result): no figure edited by hand, and every section renders."""
    report = importlib.import_module("bench.report.report")
    results = json.loads((ROOT / "bench" / "results" / "latest.json").read_text())
    assert report.render(results) == (ROOT / "docs" / "benchmarks.md").read_text()


def _imported_modules(path: Any) -> set[str]:
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


@pytest.mark.parametrize("folder", ["bench", "tools"])
def test_benchmarks_and_tools_never_import_the_tests(folder: str) -> None:
    """bench/ and tools/ run without the test suite: they import the package and tools/."""
    offenders = {p.name: sorted(m for m in _imported_modules(p) if m.split(".")[0] == "tests")
                 for p in sorted((ROOT / folder).rglob("*.py"))}
    assert {name: mods for name, mods in offenders.items() if mods} == {}
