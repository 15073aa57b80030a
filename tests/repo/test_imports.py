"""The repository's import graph, read statically (ast over every .py of its packages, no module
imported): no import cycle among its modules; the sidecar package (`exporter`) imports neither the
lab (`lab`, the client-side commands) nor the simulator; the generators sit below their runner
(tools/generate.py, `scripts/generate`) instead of importing back up into tools/; the table of
commands (`commands`) sits above the three. And what `serve`
loads is most of the sidecar package (at least SERVE_SHARE of its lines).

Every `import` counts wherever it is written (a function's body, `if TYPE_CHECKING:`): a cycle
hidden in a lazy import is a cycle all the same. `from x import y` is an edge to the module x.y
when there is one, else to x. bench/ is a folder of scripts that import each other by bare name.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from commands import cli
from tests.conftest import ROOT

PACKAGES = ("commands", "exporter", "lab", "simulator", "tools", "alerts", "dashboards", "deploy", "bench")
SCRIPTS = ("bench",)  # folders of scripts: `import x` there means the sibling x.py
GENERATORS = ("alerts", "dashboards", "deploy", "exporter", "simulator")  # never import tools/

# a package -> the packages it never imports: the command table (commands/) sits above them all
BELOW = {"exporter": ("commands", "lab", "simulator"), "lab": ("commands",),
         "simulator": ("commands",)}
SERVE_SHARE = 0.85  # of the exporter package's lines, loaded by `serve`


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
    """Each import cycle, named by one of its loops."""
    return [f"import cycle: {' -> '.join(a_cycle(graph, c))}"
            + (f" (component of {len(c)} modules)" if len(c) > 2 else "")
            for c in strongly_connected(graph)]


def test_the_graph_sees_the_imports() -> None:
    """The reader finds what is there: absolute, relative, lazy and script imports."""
    graph = import_graph()
    assert "tools.generated" in graph["tools.generate"]  # from tools.generated import ...
    assert "alerts.generate" in graph["tools.generate"]  # from alerts import generate (lazy)
    assert "bench.report.report" in graph["bench.regression"]  # from report import GOALS (a script)
    assert "alerts.config" in graph["alerts.generate"]  # from alerts import config as _config
    assert "lab.compare.matched" in graph["lab.compare.gates"]  # from lab.compare.matched import Lane
    assert "exporter.phases.deltas" in graph["lab.compare.inputs"]  # the lab reads the sidecar's modules
    assert len(graph) > 200


def test_no_import_cycle() -> None:
    wrong = cycles_report(import_graph())
    assert wrong == [], "\n".join(wrong)


def test_a_new_cycle_fails_and_names_it() -> None:
    """The check itself can fail: a back edge from a leaf makes a cycle it names in order."""
    graph = {k: set(v) for k, v in import_graph().items()}
    graph["exporter.labels"].add("exporter.snapshot.model")
    assert "exporter.labels" in graph["exporter.snapshot.model"]
    assert cycles_report(graph) == ["import cycle: exporter.labels -> exporter.snapshot.model -> "
                                    "exporter.labels"]


def rooms(graph: Mapping[str, set[str]], files: Mapping[str, Path]) -> dict[str, set[str]]:
    """The graph of the sidecar package's folders (exporter/snapshot/, exporter/cycle/, ...): a
    room imports another when one of its modules does; modules of exporter/'s top level left out."""
    def room(module: str) -> str | None:
        parts = files[module].relative_to(ROOT).parts if module in files else ()
        return ".".join(parts[:2]) if len(parts) > 2 and parts[0] == "exporter" else None

    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if (here := room(module)) is not None:
            out.setdefault(here, set()).update(
                r for t in targets if (r := room(t)) is not None and r != here)
    return out


def test_the_rooms_import_one_way() -> None:
    """No circle between the sidecar's folders: a snapshot goes from the sources' fetch through
    the snapshot's parse and the cycle to the collectors without coming back into a room."""
    graph, files = import_graph(), module_files()
    wrong = cycles_report(rooms(graph, files))
    assert wrong == [], "\n".join(wrong)
    assert "exporter.snapshot" in rooms(graph, files)["exporter.sources"]
    # The check can fail: the depth limit back in sources/ would close the circle it had.
    graph["exporter.snapshot.parse"] = {*graph["exporter.snapshot.parse"], "exporter.sources.http"}
    assert cycles_report(rooms(graph, files)) == [
        "import cycle: exporter.snapshot -> exporter.sources -> exporter.snapshot"]


def _upward(graph: Mapping[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                  if t.split(".")[0] in BELOW.get(m.split(".")[0], ()))


def _module_names(path: Path) -> set[str]:
    """String constants that are a dotted module name of the lab or the simulator."""
    return {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"(lab|simulator)(\.\w+)+", node.value)}


def test_exporter_imports_neither_the_lab_nor_the_simulator() -> None:
    """No import statement of `exporter`, lazy ones included, reaches `lab`, `simulator` or the
    command table above them; nothing there names one of their modules as a string either (no
    import by name); and the table imports each command's module by an import the graph sees."""
    graph = import_graph()
    assert _upward(graph) == []
    named = sorted(f"{m}: {name}" for m, path in module_files().items()
                   if m.split(".")[0] == "exporter" for name in _module_names(path))
    assert named == []
    table = {t for t in graph["commands.cli"] if t.split(".")[0] in ("lab", "simulator")}
    assert table == {"lab.status.command", "lab.geometry.command", "simulator.cli",
                     "lab.demo.command", "lab.client.command", "lab.evidence.command",
                     "lab.probe.command", "lab.compare.command", "lab.observer_cost.command"}
    assert len(cli.COMMANDS) == len(table)
    # The rule can fail: an edge from the sidecar package into the lab is found.
    graph["exporter.sidecar"] = {*graph["exporter.sidecar"], "lab.probe.passes"}
    assert _upward(graph) == ["exporter.sidecar -> lab.probe.passes"]


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


# What a `helios-exporter serve` process has imported before it runs the sidecar: the command
# line and the sidecar's module, as exporter/cli.py's run() reaches it.
SERVE = ("import sys, exporter.cli, exporter.sidecar; "
         "print('\\n'.join(m for m in sys.modules if m.split('.')[0] in ('exporter', 'lab', "
         "'simulator')))")


@pytest.mark.e2e
def test_serve_loads_most_of_the_sidecar_package() -> None:
    """The `exporter` package is what `serve` and `check` run: `serve` loads at least
    SERVE_SHARE of its lines (the client-side commands are the lab's), and nothing of the lab or
    the simulator."""
    out = subprocess.run([sys.executable, "-c", SERVE], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert [m for m in out if not m.startswith("exporter")] == []
    files = {m: path for m, path in module_files().items() if m.split(".")[0] == "exporter"}
    loaded = sum(_lines(files[m]) for m in out if m in files)
    total = sum(_lines(path) for path in files.values())
    assert loaded / total >= SERVE_SHARE, (
        f"serve loads {loaded} of the exporter package's {total} lines "
        f"({loaded / total:.1%}); not loaded: "
        + ", ".join(sorted((m for m in files if m not in out), key=lambda m: -_lines(files[m]))))


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
