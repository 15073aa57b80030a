"""Stand-ins for what needs a GPU or a running server, and reading a wheel's
own source for the few definitions a stand-in must carry."""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock


class Names(types.ModuleType):
    """A module that answers every name with a placeholder class: for modules
    whose names the code under test only mentions (types, GPU helpers)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        placeholder = type(name, (), {"__module__": self.__name__})
        setattr(self, name, placeholder)
        return placeholder


class _Absent(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves every module under the given top-level names as a MagicMock."""

    def __init__(self, tops: set[str]) -> None:
        self.tops = tops

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".", maxsplit=1)[0] in self.tops:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        module = mock.MagicMock(name=spec.name)
        module.__path__ = []
        module.__spec__ = spec
        module.__name__ = spec.name
        return module

    def exec_module(self, module: Any) -> None:
        return None


class Stubbed:
    """Each module replaced, with the reason: recorded in the fixture."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}

    def absent(self, reasons: dict[str, str]) -> None:
        """Third-party packages not installed here, as MagicMock modules."""
        sys.meta_path.insert(0, _Absent(set(reasons)))
        self.modules.update(reasons)

    def module(
        self, name: str, reason: str, *, path: Path | None = None, names: bool = False,
        **attrs: Any,
    ) -> types.ModuleType:
        module = Names(name) if names else types.ModuleType(name)
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


def _defines(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    return set()


def definitions(path: Path, names: tuple[str, ...], namespace: dict[str, Any]) -> dict[str, Any]:
    """Run only the named top-level classes, functions and assignments of a source file,
    in the given namespace (what they need, without the file's imports)."""
    wanted: list[ast.stmt] = [node for node in _nodes(path) if _defines(node) & set(names)]
    found = set().union(*(_defines(node) for node in wanted)) & set(names)
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


def methods(path: Path, class_name: str, names: tuple[str, ...], namespace: dict[str, Any]) -> type:
    """A class holding only the named methods of a class in a source file,
    run in the given namespace (the class's bases and imports left out)."""
    found = next((node for node in _nodes(path)
                  if isinstance(node, ast.ClassDef) and node.name == class_name), None)
    if found is None:
        raise LookupError(f"{path}: no class {class_name}")
    body: list[ast.stmt] = [node for node in found.body
                            if isinstance(node, ast.FunctionDef) and node.name in names]
    if {getattr(node, "name", "") for node in body} != set(names):
        raise LookupError(f"{path}: {class_name} lacks one of {names}")
    holder = ast.ClassDef(name=class_name, bases=[], keywords=[], body=body,
                          decorator_list=[])
    module = ast.fix_missing_locations(ast.Module(body=[holder], type_ignores=[]))
    exec(compile(module, str(path), "exec"), namespace)  # noqa: S102 - the wheel's source
    return namespace[class_name]  # type: ignore[no-any-return]
