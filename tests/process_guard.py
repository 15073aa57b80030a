"""The `e2e` marker means "starts a process", and the suite holds itself to it.

- A fixture that starts processes is declared with `@process_fixture` (same arguments as
  `pytest.fixture`) where it is defined; every test that uses it, directly or through another
  fixture, is marked `e2e` at collection. A test that starts one itself carries the mark.
- While an unmarked test sets up and runs, every way of starting a process
  (`subprocess.Popen`, which `subprocess.run` and asyncio's subprocesses use, `os.system`,
  `os.posix_spawn`, `os.fork`) is watched; one that starts a process fails with what it
  started. So `pytest -m "not e2e"` starts none: a quick unit run.

tests/conftest.py loads these hooks; tests/repo/test_markers.py checks that the check catches one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])

PROCESS_FIXTURES: set[str] = set()


def process_fixture(*args: Any, **kwargs: Any) -> Any:
    """`pytest.fixture`, for a fixture that starts processes: its users are marked e2e."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        PROCESS_FIXTURES.add(args[0].__name__)
        return pytest.fixture(args[0])

    def wrap(fn: F) -> F:
        PROCESS_FIXTURES.add(kwargs.get("name") or fn.__name__)
        return pytest.fixture(*args, **kwargs)(fn)  # type: ignore[no-any-return]

    return wrap


def mark_folder(folder: Path, mark: pytest.MarkDecorator) -> Callable[[list[pytest.Item]], None]:
    """A conftest's `pytest_collection_modifyitems` that gives every test under `folder` `mark`
    (the marked suites tests/e2e and tests/hostile)."""

    def modify(items: list[pytest.Item]) -> None:
        for item in items:
            if item.path.is_relative_to(folder):
                item.add_marker(mark)

    return modify


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


class _Watch:
    """What was started while watching; the originals back in place after `stop`."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._undo: list[Callable[[], None]] = []

    def _patch(self, owner: Any, name: str, describe: Callable[..., str]) -> None:
        original = getattr(owner, name)

        def watched(*args: Any, **kwargs: Any) -> Any:
            self.started.append(describe(*args, **kwargs))
            return original(*args, **kwargs)

        setattr(owner, name, watched)
        self._undo.append(lambda: setattr(owner, name, original))

    def start(self) -> None:
        self.started = []
        self._patch(subprocess.Popen, "__init__", lambda _self, *a, **k:
                    f"subprocess.Popen({a[0] if a else k.get('args')!r})")
        self._patch(os, "system", lambda command: f"os.system({command!r})")
        self._patch(os, "fork", lambda: "os.fork()")
        for name in ("posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                self._patch(os, name, lambda path, *_a, _n=name, **_k: f"os.{_n}({path!r})")

    def stop(self) -> list[str]:
        while self._undo:
            self._undo.pop()()
        return self.started


_watch = _Watch()


def _unmarked(item: pytest.Item) -> bool:
    return item.get_closest_marker("e2e") is None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    if not _unmarked(item):
        return (yield)
    _watch.start()
    try:
        return (yield)
    except BaseException:
        _watch.stop()  # the test will not run
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if not _unmarked(item):
        return (yield)
    try:
        result = yield
    finally:
        started = _watch.stop()
    if started:
        pytest.fail(f"{item.nodeid} starts a process but is not marked e2e: use a fixture "
                    "declared with @process_fixture, or mark it @pytest.mark.e2e. Started:\n  "
                    + "\n  ".join(started[:10]), pytrace=False)
    return result
