"""Shared fixtures for the alerting tests: repository paths, binaries, the generator module."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import missing
from tests.process_guard import process_fixture

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@process_fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is required (Debian package prometheus)")
    return path


@process_fixture(scope="session")
def amtool() -> str:
    path = shutil.which("amtool")
    if path is None:
        missing("amtool not installed (Debian package prometheus-alertmanager)")
    return path


@pytest.fixture(scope="session")
def generate() -> ModuleType:
    """alerts/generate.py, the rules from the config (what `scripts/generate alerts` runs)."""
    return importlib.import_module("alerts.generate")
