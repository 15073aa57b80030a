"""Compile the fake NVML library once per session and hand tests a writable GPU table.

Every test goes through the real nvidia-ml-py bindings into the compiled fake; only the fake's
table (a key=value file named by $FAKE_NVML_CONFIG) changes between polls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exporter.sources.nvml import NvmlSource
from tests.helpers import missing
from tests.process_guard import process_fixture
from tools.fake_nvml import FakeConfig, FakeLibs, build, find_compiler, find_header


@process_fixture(scope="session")
def fake_libs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeLibs]:
    header, compiler = find_header(), find_compiler()
    if header is None or compiler is None:
        missing(f"fake NVML needs nvml.h (nvidia-nvml-dev wheel; found: {header}) and a C "
                    f"compiler (found: {compiler})")
    root = tmp_path_factory.mktemp("fake-nvml")
    libs = FakeLibs(build(root / "full", header=header, compiler=compiler),
                    build(root / "old", old_driver=True, header=header, compiler=compiler),
                    root / "gpus.conf")
    previous = os.environ.get("FAKE_NVML_CONFIG")
    # Set once for the session: the C side calls getenv() from NVML threads, never re-set it.
    os.environ["FAKE_NVML_CONFIG"] = str(libs.config_path)
    yield libs
    if previous is None:
        os.environ.pop("FAKE_NVML_CONFIG", None)
    else:
        os.environ["FAKE_NVML_CONFIG"] = previous


@pytest.fixture
def fake(fake_libs: FakeLibs) -> FakeConfig:
    config = FakeConfig(fake_libs.config_path)
    config.write(count=2)
    return config


@pytest.fixture
def make_source(fake_libs: FakeLibs) -> Iterator[Callable[..., NvmlSource]]:
    """NvmlSource factory (default: the full fake) that closes every source it made."""
    made: list[NvmlSource] = []

    def make(library: Path | None = None, gpu_timeout: float = 1.0) -> NvmlSource:
        source = NvmlSource(str(library or fake_libs.full), gpu_timeout=gpu_timeout)
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()
