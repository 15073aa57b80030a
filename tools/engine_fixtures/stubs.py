"""Stand-ins for what needs a GPU or a running server, and reading a wheel's
own source for the few definitions a stand-in must carry."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path
from typing import Any


class Stubbed:
    """Each module replaced, with the reason: recorded in the fixture."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}

    def module(
        self, name: str, reason: str, *, path: Path | None = None, **attrs: Any
    ) -> types.ModuleType:
        module = types.ModuleType(name)
        if path is not None:
            module.__path__ = [str(path)]
        for key, value in attrs.items():
            setattr(module, key, value)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, module)
        self.modules[name] = reason
        return module


def _nodes(path: Path) -> list[ast.stmt]:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body


def definitions(path: Path, names: tuple[str, ...], namespace: dict[str, Any]) -> dict[str, Any]:
    """Run only the named top-level classes and functions of a source file,
    in the given namespace (what they need, without the file's imports)."""
    wanted: list[ast.stmt] = [
        node for node in _nodes(path)
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in names
    ]
    found = {getattr(node, "name", "") for node in wanted}
    if found != set(names):
        raise LookupError(f"{path}: no {sorted(set(names) - found)}")
    code = compile(ast.Module(body=wanted, type_ignores=[]), str(path), "exec")
    exec(code, namespace)  # noqa: S102 - the wheel's own source, read on purpose
    return {name: namespace[name] for name in names}


def literal_defaults(path: Path, class_name: str) -> dict[str, Any]:
    """A class's annotated fields whose defaults are literals, as the wheel
    declares them (the engine's configuration defaults)."""
    for node in _nodes(path):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            defaults: dict[str, Any] = {}
            for item in node.body:
                if (
                    isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and item.value is not None
                ):
                    try:
                        defaults[item.target.id] = ast.literal_eval(item.value)
                    except ValueError:
                        continue
            return defaults
    raise LookupError(f"{path}: no class {class_name}")
