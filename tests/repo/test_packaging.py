"""scripts/bootstrap's editable install shows no warning (a newcomer's first output): no setuptools
deprecation (the SPDX `license` string), nothing else from the build backend. The backend's
editable build (what pip runs, and whose warnings pip shows) on a copy of the tracked files, with
bootstrap's own environment for the install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import tracked_copy
from tools.harness import ROOT

pytestmark = pytest.mark.e2e  # every test here starts a process

# As pip's in-process hook runs the backend: the warnings it records are what pip shows.
BUILD = """
import sys, warnings
from setuptools import build_meta
with warnings.catch_warnings(record=True) as caught:
    build_meta.build_editable(sys.argv[1])
for w in caught:
    if issubclass(w.category, UserWarning):
        print(f"shown by pip: {w.category.__name__}: {w.message}")
"""


def test_the_editable_build_warns_of_nothing(tmp_path: Path) -> None:
    bootstrap = (ROOT / "scripts" / "bootstrap").read_text()
    install = next(line for line in bootstrap.splitlines() if "pip install -q -e" in line)
    env = dict(re.findall(r"(\w+)=\"([^\"]*)\"", install.split(".venv/bin/python")[0]))
    copy = tracked_copy(tmp_path / "src")
    result = subprocess.run([sys.executable, "-c", BUILD, str(tmp_path / "wheels")], cwd=copy,
                            capture_output=True, text=True, timeout=300, check=False,
                            env={**os.environ, **env})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert list((tmp_path / "wheels").glob("helios_exporter-*.whl")), out
    shown = [line for line in result.stdout.splitlines() if line.startswith("shown by pip: ")]
    assert shown == [], out
