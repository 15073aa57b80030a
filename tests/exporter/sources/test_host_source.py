"""HostSource + HostCollector against a real child process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporter.collectors.host import HostCollector
from exporter.labels import ErrorReason
from exporter.sources.base import Result
from exporter.sources.host import HostReport, HostSource
from tests.helpers import promtool_check_metrics
from tests.process_guard import process_fixture

# A distinctive argv[0] so that the name lookup cannot pick up an unrelated process.
ENGINE_NAME = f"helios-fake-engine-{os.getpid()}"


@process_fixture
def child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    # exec -a gives the child a unique argv[0] (cmdline[0]); its name stays "python..."
    proc = subprocess.Popen(
        ["bash", "-c", f'exec -a {ENGINE_NAME} "{sys.executable}" -c "import time; '
         'time.sleep(30)"'])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until exec has replaced bash
            try:
                if psutil.Process(proc.pid).cmdline()[:1] == [ENGINE_NAME]:
                    break
            except psutil.Error:
                pass
            time.sleep(0.02)
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def render(result: Result[HostReport]) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(HostCollector(lambda: result))
    return reg


def value(reg: CollectorRegistry, name: str) -> float:
    got = reg.get_sample_value(name)
    assert got is not None, name
    return got


def check_found(result: Result[HostReport], pid: int) -> CollectorRegistry:
    assert result.ok, result.message
    assert result.value is not None and result.value.engine is not None
    reg = render(result)
    assert reg.get_sample_value("helios_engine_process_up") == 1.0
    assert value(reg, "helios_engine_process_resident_bytes") > 0
    assert value(reg, "helios_engine_process_threads") >= 1
    assert value(reg, "helios_engine_process_cpu_seconds_total") >= 0
    assert (reg.get_sample_value("helios_engine_process_start_time_seconds")
            == psutil.Process(pid).create_time())
    return reg


def test_engine_by_pid_file_then_killed(tmp_path: Path, child: subprocess.Popen[bytes]) -> None:
    pid_file = tmp_path / "engine.pid"
    pid_file.write_text(f"{child.pid}\n")
    source = HostSource(pid_file, None)
    reg = check_found(source.poll(), child.pid)
    assert all(not s.labels for m in reg.collect() for s in m.samples)  # no pid label
    promtool_check_metrics(generate_latest(reg))
    child.kill()
    child.wait(timeout=10)
    result = source.poll()
    assert result.reason is ErrorReason.NOT_FOUND
    reg = render(result)
    assert reg.get_sample_value("helios_engine_process_up") == 0.0
    assert reg.get_sample_value("helios_engine_process_resident_bytes") is None
    # host memory survives a missing engine
    assert reg.get_sample_value("helios_host_memory_total_bytes") == psutil.virtual_memory().total


def test_engine_by_name_then_killed(child: subprocess.Popen[bytes]) -> None:
    source = HostSource(None, ENGINE_NAME)
    check_found(source.poll(), child.pid)
    check_found(source.poll(), child.pid)  # cached process, still valid
    child.kill()
    child.wait(timeout=10)
    result = source.poll()
    assert result.reason is ErrorReason.NOT_FOUND
    assert render(result).get_sample_value("helios_engine_process_up") == 0.0


@pytest.mark.e2e
def test_engine_by_process_name_comm() -> None:
    """Match on the process name (comm, set with prctl) rather than argv[0]."""
    comm = f"hx{os.getpid() % 10**9}"[:15]
    code = ("import ctypes, time; "
            f"ctypes.CDLL(None).prctl(15, ctypes.c_char_p(b'{comm}'), 0, 0, 0); time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(proc.pid).name() != comm and time.monotonic() < deadline:
            time.sleep(0.02)
        check_found(HostSource(None, comm).poll(), proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.e2e
def test_restarted_engine_gets_a_new_start_time(tmp_path: Path) -> None:
    pid_file = tmp_path / "engine.pid"
    source = HostSource(pid_file, None)
    starts = []
    for _ in range(2):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            pid_file.write_text(str(proc.pid))
            result = source.poll()
            assert result.value is not None and result.value.engine is not None
            starts.append(result.value.engine.start_time_seconds)
        finally:
            proc.kill()
            proc.wait(timeout=10)
        time.sleep(0.02)  # create_time has 10 ms resolution (clock ticks)
    assert starts[0] != starts[1]


def test_missing_and_garbage_pid_file(tmp_path: Path) -> None:
    pid_file = tmp_path / "engine.pid"
    result = HostSource(pid_file, None).poll()
    assert result.reason is ErrorReason.NOT_FOUND
    assert render(result).get_sample_value("helios_engine_process_up") == 0.0
    pid_file.write_text("not a pid")
    result = HostSource(pid_file, None).poll()
    assert result.reason is ErrorReason.OTHER
    assert render(result).get_sample_value("helios_engine_process_up") is None


def test_unknown_process_name_is_not_found() -> None:
    result = HostSource(None, "helios-no-such-engine-xyzzy").poll()
    assert result.reason is ErrorReason.NOT_FOUND
    assert render(result).get_sample_value("helios_engine_process_up") == 0.0


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every pid file")
def test_unreadable_pid_file_is_permission(tmp_path: Path) -> None:
    pid_file = tmp_path / "engine.pid"
    pid_file.write_text("1")
    pid_file.chmod(0)
    result = HostSource(pid_file, None).poll()
    assert result.reason is ErrorReason.PERMISSION


def test_nothing_configured_exports_host_memory_only() -> None:
    """The sidecar's own process is client_python's process_* (tests/exporter/collectors/test_registry.py)."""
    result = HostSource(None, None).poll()
    assert result.ok and result.value is not None
    names = {s.name for m in render(result).collect() for s in m.samples}
    assert names == {"helios_host_memory_available_bytes", "helios_host_memory_total_bytes"}
    reg = render(result)
    assert 0 < value(reg, "helios_host_memory_available_bytes") <= (
        value(reg, "helios_host_memory_total_bytes"))
