"""Shared fixtures for the alerting tests: repository paths, binaries, the generator module."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import missing

ROOT = Path(__file__).resolve().parents[2]
ALERTS_DIR = ROOT / "alerts"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is required (Debian package prometheus)")
    return path


@pytest.fixture(scope="session")
def amtool() -> str:
    path = shutil.which("amtool")
    if path is None:
        missing("amtool not installed (Debian package prometheus-alertmanager)")
    return path


@pytest.fixture(scope="session")
def generate() -> ModuleType:
    """alerts/generate.py as a module (alerts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("helios_alerts_generate", ALERTS_DIR / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module
