"""The repository's import graph, read statically (ast over every .py of its packages, no module
imported): no import cycle among its modules, and the generators sit below their runner
(tools/generate.py, `scripts/generate`) instead of importing back up into tools/.

Every `import` counts wherever it is written (a function's body, `if TYPE_CHECKING:`): a cycle
hidden in a lazy import is a cycle all the same. `from x import y` is an edge to the module x.y
when there is one, else to x. bench/ is a folder of scripts that import each other by bare name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("exporter", "simulator", "tools", "alerts", "dashboards", "deploy", "bench")
SCRIPTS = ("bench",)  # folders of scripts: `import x` there means the sibling x.py
GENERATORS = ("alerts", "dashboards", "deploy", "exporter", "simulator")  # never import tools/

# Cycles known and left for later, each the exact set of modules of one strongly connected
# component. A new cycle, or one of these growing, fails the test; one that is gone must leave
# this list (the test says so).
KNOWN_CYCLES: tuple[frozenset[str], ...] = (
    # issue 34, item 2 ("one document writer"): the evidence report's "write JSON, try the
    # picture, write the markdown" reaches back into evidence from its picture and its report.
    frozenset({"exporter.experiment.evidence", "exporter.experiment.plot",
               "exporter.experiment.report"}),
    # issue 34, item 2: the same shape in observer cost's report and picture.
    frozenset({"exporter.experiment.observer_cost_report",
               "exporter.experiment.observer_cost_plot"}),
    # Not named in issue 34 (this test found it); left with its items 1 and 2, which move these
    # files: compare's gates and its strict-output gate name compare's Lane in their annotations
    # (`if TYPE_CHECKING:`, type-only). Lane's home belongs below all three.
    frozenset({"exporter.experiment.compare", "exporter.experiment.gates",
               "exporter.experiment.strict"}),
)


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under PACKAGES."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """`name` or its longest prefix that is one of the repository's modules."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def _targets(module: str, path: Path, modules: Mapping[str, Path]) -> Iterator[str]:
    """The dotted names `module` (in `path`) imports, as written but made absolute."""
    is_package = path.name == "__init__.py"
    script_folder = next((s for s in SCRIPTS if module.startswith(s + ".")), None)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            bases, names = [base], [alias.name for alias in node.names]
        else:
            continue
        for written in bases:
            base = written
            if script_folder and f"{script_folder}.{written.split('.')[0]}" in modules:
                base = f"{script_folder}.{written}"
            yield from ([f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
                        or [base])


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the repository's modules it imports (itself excluded)."""
    modules = module_files(root)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        resolved = {_resolve(t, modules) for t in _targets(module, path, modules)}
        graph[module] = {t for t in resolved if t is not None and t != module}
    return graph


def strongly_connected(graph: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def a_cycle(graph: Mapping[str, set[str]], component: frozenset[str]) -> list[str]:
    """One cycle through `component`, as a path that ends where it starts."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & component):
            if child == start:
                return [*paths[node], start]
            if child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    raise AssertionError(f"no cycle through {start}")  # a component always has one


def cycles_report(graph: Mapping[str, set[str]]) -> list[str]:
    """What is wrong: each new cycle (named by one of its loops), each known one that is gone."""
    components = strongly_connected(graph)
    wrong = [f"import cycle: {' -> '.join(a_cycle(graph, c))}"
             + (f" (component of {len(c)} modules)" if len(c) > 2 else "")
             for c in components if c not in KNOWN_CYCLES]
    wrong += [f"known cycle gone, remove it from KNOWN_CYCLES: {sorted(c)}"
              for c in KNOWN_CYCLES if c not in components]
    return wrong


def test_the_graph_sees_the_imports() -> None:
    """The reader finds what is there: absolute, relative, lazy and script imports."""
    graph = import_graph()
    assert "tools.generated" in graph["tools.generate"]  # from tools.generated import ...
    assert "alerts.generate" in graph["tools.generate"]  # from alerts import generate (lazy)
    assert "bench.report" in graph["bench.regression"]  # from report import GOALS (a script)
    assert "alerts.config" in graph["alerts.generate"]  # from alerts import config as _config
    assert len(graph) > 200


def test_no_import_cycle() -> None:
    wrong = cycles_report(import_graph())
    assert wrong == [], "\n".join(wrong)


def test_a_new_cycle_fails_and_names_it() -> None:
    """The check itself can fail: a back edge from a leaf makes a cycle it names in order."""
    graph = {k: set(v) for k, v in import_graph().items()}
    graph["exporter.labels"].add("exporter.snapshot_model")
    assert "exporter.labels" in graph["exporter.snapshot_model"]
    assert "import cycle: exporter.labels -> exporter.snapshot_model -> exporter.labels" in \
        cycles_report(graph)
    fixed = {k: v - {t for t in v if any(t in c and k in c for c in KNOWN_CYCLES)}
             for k, v in import_graph().items()}
    assert len(cycles_report(fixed)) == len(KNOWN_CYCLES)  # each says "gone"


def test_generators_sit_below_their_runner() -> None:
    """alerts/, dashboards/, deploy/ (and the sidecar) import nothing from tools/: scripts/generate
    (tools/generate.py) runs them, they have no command line of their own."""
    graph = import_graph()
    upward = sorted(f"{m} -> {t}" for m, targets in graph.items()
                    if m.split(".")[0] in GENERATORS for t in targets if t.startswith("tools."))
    assert upward == []
    commands = sorted(str(path.relative_to(ROOT)) for m, path in module_files().items()
                      if m.split(".")[0] in ("alerts", "dashboards", "deploy")
                      and "__main__" in path.read_text(encoding="utf-8"))
    assert commands == [], "a generator with its own command line: make it a scripts/generate entry"
