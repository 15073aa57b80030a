"""Release hygiene: one version (pyproject.toml) that everything showing one follows, a changelog
for it, and the placeholder registry named as a placeholder wherever it appears."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
# Where our own version is shown as a tag, a ref or an output: image tags of helios-exporter,
# kustomize newTag, remote refs, `--version` and build_info examples.
SHOWN = re.compile(
    r"helios-exporter:(\d+\.\d+\.\d+)\b|newTag: (\d+\.\d+\.\d+)|\?ref=v(\d+\.\d+\.\d+)"
    r"|helios-exporter (\d+\.\d+\.\d+) \(Python|[{(,]version=\"(\d+\.\d+\.\d+)\"")
PLACEHOLDER = "registry.example.com"


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", *patterns], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.stdout.split()]


def test_changelog_has_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\S+)", text, re.MULTILINE)
    assert headings[:2] == ["Unreleased", VERSION] or headings[0] == VERSION, headings


@pytest.mark.e2e  # git ls-files
def test_every_shown_version_is_pyprojects() -> None:
    wrong = []
    for path in tracked("deploy", "docs", "README.md", "Dockerfile", "exporter", "scripts"):
        if path.suffix not in {".md", ".yaml", ".yml", ".py", ""} or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in SHOWN.finditer(line):
                shown = next(g for g in match.groups() if g)
                if shown != VERSION:
                    wrong.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}")
    assert not wrong, f"pyproject.toml says {VERSION}:\n" + "\n".join(wrong)


@pytest.mark.e2e  # git ls-files
def test_the_placeholder_registry_is_called_one_wherever_it_appears() -> None:
    unnamed = []
    for path in tracked("deploy", "docs", "README.md", "Dockerfile", "scripts", "mixin"):
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for i, line in enumerate(lines):
            if PLACEHOLDER in line:
                near = " ".join(lines[max(0, i - 3):i + 2]).lower()
                if "placeholder" not in near:
                    unnamed.append(f"{path.relative_to(ROOT)}:{i + 1}: {line.strip()}")
    assert not unnamed, "say it is a placeholder:\n" + "\n".join(unnamed)
