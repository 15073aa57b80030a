"""The Dockerfile and the build context as the deployment tests read them: a small Dockerfile
reader, .dockerignore with Docker's semantics, and the fixtures `dockerfile` and `context`
(tests/deploy/conftest.py offers them to every test here)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCKERFILE = ROOT / "Dockerfile"
STATE_DIR = "/var/lib/helios-exporter"
PRUNE = {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache",
         ".pytest_cache", ".hypothesis", "build", "dist"}


# ---- a small Dockerfile reader --------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    stage: int
    op: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped; stage = FROM count."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    out, stage = [], -1
    for line in logical:
        op, _, args = line.partition(" ")
        if op.upper() == "FROM":
            stage += 1
        out.append(Instruction(stage, op.upper(), args.strip()))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return instructions(DOCKERFILE.read_text(encoding="utf-8"))


def final_stage(dockerfile: list[Instruction], op: str) -> list[str]:
    last = max(i.stage for i in dockerfile)
    return [i.args for i in dockerfile if i.stage == last and i.op == op]


def healthcheck_argv(dockerfile: list[Instruction]) -> list[str]:
    (health,) = final_stage(dockerfile, "HEALTHCHECK")
    argv: list[str] = json.loads(health[health.index("CMD ") + 4:])
    return argv


# ---- build context ------------------------------------------------------------------------------


def ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (is_exception, regex), Docker's semantics: Go filepath.Match plus `**`,
    a pattern also covers everything below a matching directory, the last match wins."""
    rules = []
    for raw in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        rx, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                rx, i = rx + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                rx, i = rx + ".*", i + 2
            elif pattern[i] == "*":
                rx, i = rx + "[^/]*", i + 1
            elif pattern[i] == "?":
                rx, i = rx + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                rx, i = rx + pattern[i:end + 1], end + 1
            else:
                rx, i = rx + re.escape(pattern[i]), i + 1
        rules.append((negate, re.compile(rx)))
    return rules


def in_context(rel: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = rel.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for negate, rx in rules:
        if any(rx.fullmatch(p) for p in prefixes):
            excluded = not negate
    return not excluded


@pytest.fixture(scope="module")
def context() -> set[str]:
    """Files of the working tree Docker would send as the build context."""
    rules = ignore_rules()
    files = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in PRUNE and not d.endswith(".egg-info")]
        for name in filenames:
            rel = (Path(dirpath) / name).relative_to(ROOT).as_posix()
            if in_context(rel, rules):
                files.add(rel)
    return files


def copies(dockerfile: list[Instruction]) -> list[tuple[list[str], str]]:
    """(sources, destination) of the build stage's COPY instructions from the context."""
    out = []
    for i in dockerfile:
        if i.stage == 0 and i.op == "COPY" and "--from" not in i.args:
            *sources, dest = i.args.split()
            out.append((sources, dest))
    assert out
    return out
