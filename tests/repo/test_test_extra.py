"""`pip install -e '.[test]'` installs what the tests import: every third-party module imported
under tests/ (and tools/, which the tests use) comes from a distribution that the package's
`test` extra requires, directly or through another requirement."""

from __future__ import annotations

import ast
import importlib.metadata as md
import sys
from pathlib import Path

from packaging.requirements import Requirement

from tests.conftest import ROOT

# The repository's own top-level folders of Python (a new one, such as lab/, is not a
# dependency).
OURS = {p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))} | {"tests"}


def _imports(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


def _closure(dist: str, extras: set[str]) -> set[str]:
    """`dist` and every distribution it requires (with these extras), by normalised name."""
    seen: set[str] = set()
    todo = [(dist, extras)]
    while todo:
        name, wanted = todo.pop()
        key = name.lower().replace("_", "-")
        if (key, frozenset(wanted)) in seen:
            continue
        seen.add((key, frozenset(wanted)))  # type: ignore[arg-type]
        for text in md.requires(name) or []:
            req = Requirement(text)
            env = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(e) for e in env):
                todo.append((req.name, set(req.extras)))
    return {k for k, _ in seen}  # type: ignore[misc]


def test_the_test_extra_installs_every_module_the_tests_import() -> None:
    local = OURS | {p.stem for p in (ROOT / "tests").rglob("*.py")}  # modules beside a test
    third_party = {m for m in _imports(ROOT / "tests") | _imports(ROOT / "tools")
                   if m not in local and m not in sys.stdlib_module_names and m != "__future__"}
    providers = md.packages_distributions()
    installed = _closure("helios-exporter", {"test"})
    unprovided = {m: providers.get(m) for m in third_party
                  if not {d.lower().replace("_", "-") for d in providers.get(m, [])} & installed}
    assert "matplotlib" in third_party  # the import the extra once lacked
    assert unprovided == {}
