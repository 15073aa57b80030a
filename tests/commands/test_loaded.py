"""What a `helios-exporter` process imports, seen by running it: `python -X importtime` writes a
line for every module the process imports, whenever it does, so the modules a command loaded are
read off its stderr. `--help`, `serve` and `check` import nothing of the lab or the simulator (the
table above them imports a command's module only when that command is asked for); a lab command
imports its own package and not the others'."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from commands import cli
from tools.harness import PYTHON, ROOT, Procs, free_port, wait_http

pytestmark = pytest.mark.e2e

ABOVE = ("lab", "simulator")  # what the sidecar's process never imports


def imported(stderr: str) -> set[str]:
    """The modules an `-X importtime` process reported (`import time: ... | name`)."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2
            and not line.endswith("imported package")}


def others(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in ABOVE)


def run(*argv: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "commands", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, imported(done.stderr)


def test_the_reader_sees_a_lab_command_import_its_package_alone() -> None:
    """The check can fail: `geometry --help` loads the geometry package, and only it."""
    code, modules = run("geometry", "--help")
    assert code == 0
    assert {"lab.geometry.command", "lab.geometry.partitions"} <= modules
    assert [m for m in others(modules) if m.split(".")[:2] != ["lab", "geometry"]] == ["lab"]


def test_help_imports_no_command_module() -> None:
    code, modules = run("--help")
    assert code == 0 and "commands.cli" in modules
    assert others(modules) == []
    assert len(cli.COMMANDS) == 9


@pytest.mark.parametrize("name", ["serve", "check"])
def test_the_sidecars_help_imports_neither(name: str) -> None:
    code, modules = run(name, "--help")
    assert code == 0 and "exporter.config" in modules
    assert others(modules) == []


def test_check_imports_neither() -> None:
    """`check` against a port nobody listens on: it polls (and fails) all the same."""
    code, modules = run("check", "--engine-url", f"http://127.0.0.1:{free_port()}")
    assert code != 0 and "exporter.check" in modules
    assert others(modules) == []


def test_serve_imports_neither(procs: Procs) -> None:
    """A short `serve`: ready, one scrape of /metrics and /status, then SIGTERM."""
    port = free_port()
    proc = procs.start("serve", [
        PYTHON, "-X", "importtime", "-m", "commands", "serve", "--engine-url",
        f"http://127.0.0.1:{free_port()}", "--listen", f"127.0.0.1:{port}", "--state-dir",
        str(procs.workdir / "state"), "--no-nvml", "--poll-interval", "0.5"])
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/readyz", 60, proc)
    for path in ("/metrics", "/status", "/"):
        assert httpx.get(url + path, timeout=10).status_code < 500, path
    assert proc.stop() == 0
    modules = imported(proc.log.read_text(errors="replace"))
    assert {"exporter.sidecar", "exporter.app"} <= modules
    assert others(modules) == []
