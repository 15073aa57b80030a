"""The README's code blocks, run as written in a copy of the checkout, as a newcomer would run
them: every `sh` block, and every command form of the `text` block checked against the parser.

Substituted only what the README tells the reader to choose: the ports of the "Running it" block
(its `ENGINE=... SIDECAR=...` line; "change them if something else listens there"). `scripts/demo`
runs until Ctrl-C, as the README says, so the test presses it (SIGINT to the process group, as a
terminal does) once the narration started. `scripts/test` is this suite: it is not run again here.

The copy holds the tracked files as they are in the work tree (an edited README is tested before
it is committed) and links this checkout's `.venv`, so `scripts/bootstrap` in the copy finds it up
to date instead of building another (minutes)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from commands import cli
from tests.helpers import tracked_copy
from tests.process_guard import process_fixture
from tools.harness import ROOT, free_port

README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text()) if lang == kind]


@process_fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # scripts/bootstrap in the copy would reinstall into the linked .venv, pointing it at the copy:
    # its stamp must be current (computed by bootstrap's own `want=` line).
    stamp = ROOT / ".venv" / ".bootstrap-stamp"
    want = next(line for line in (ROOT / "scripts" / "bootstrap").read_text().splitlines()
                if line.startswith("want="))
    wanted = subprocess.run(["bash", "-c", f"{want}; echo $want"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    if not stamp.exists() or stamp.read_text().strip() != wanted:
        pytest.fail("the .venv is older than pyproject.toml: run scripts/bootstrap first")
    copy = tracked_copy(tmp_path_factory.mktemp("readme") / "helios-exporter")
    (copy / ".venv").symlink_to(ROOT / ".venv")
    return copy


def run_block(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """`script` in bash -e (a reader sees a failing command; the test stops at it) in its own
    process group, which is killed afterwards whatever the script left running."""
    proc = subprocess.Popen(["bash", "-e", "-c", script], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, process_group=0,
                            env={**os.environ, "TMPDIR": str(cwd.parent)})
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the block ran longer than {timeout}s:\n{out}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def test_the_readme_has_the_blocks_this_test_runs() -> None:
    """A new `sh` block needs a way to run here: it fails until this file knows it."""
    sh = blocks("sh")
    assert len(sh) == 2, "a new sh block in README.md: run it in tests/repo/test_readme.py"
    assert [line.split()[0] for line in sh[0].splitlines()] == ["scripts/demo", "scripts/test"]
    assert sh[1].splitlines()[0].startswith(". .venv/bin/activate")


def test_the_two_commands(checkout: Path) -> None:
    demo_line, test_line = blocks("sh")[0].splitlines()
    script = checkout / shlex.split(test_line, comments=True)[0]
    assert script.stat().st_mode & stat.S_IXUSR  # the suite itself: not run again from here
    out = checkout / "demo.out"
    with out.open("w") as sink:
        proc = subprocess.Popen(["bash", "-c", demo_line], cwd=checkout, stdout=sink,
                                stderr=subprocess.STDOUT, process_group=0,
                                env={**os.environ, "TMPDIR": str(checkout.parent),
                                     "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 120
        while "] restore  " not in out.read_text():  # the narration started
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        # Each child has 10 s to stop before the demo kills it (Prometheus, Alertmanager, the
        # sidecar, the engine); alone it stops in seconds.
        assert proc.wait(timeout=90) == 0, out.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    text = out.read_text()
    urls = [line.split()[:2] for line in text.splitlines() if "http://127.0.0.1:" in line]
    assert urls[0] == ["status", "page"] and ["prometheus", "alerts"] in urls, text
    assert "demo: stopping" in text and "bootstrap" not in text  # up to date: silent
    assert list(checkout.parent.glob("helios-demo-*")) == []


def test_running_it(checkout: Path) -> None:
    block = blocks("sh")[1]
    ports = "ENGINE=127.0.0.1:8000 SIDECAR=127.0.0.1:19400"
    assert block.count(ports) == 1
    script = block.replace(ports, f"ENGINE=127.0.0.1:{free_port()} SIDECAR=127.0.0.1:{free_port()}")
    result = run_block(script, checkout, timeout=120)
    out = result.stdout
    logs = "".join(f"\n--- {name}:\n" + (checkout / name).read_text()[-3000:]
                   for name in ("sidecar.log", "engine.log") if (checkout / name).exists())
    assert result.returncode == 0, out + logs
    assert re.search(r'^helios_offload_slab_free\{generation="g-[^"]+",kind="page"\} \d', out,
                     re.MULTILINE), out
    # the prime fills the rows within the example's wait: row pressure, no page pressure
    assert re.search(r'^helios_offload_eviction_attempts_total\{[^}]*pressure="row"\} [1-9]', out,
                     re.MULTILINE), out
    assert re.search(r'^helios_offload_eviction_attempts_total\{[^}]*pressure="page"\} 0\.0$',
                     out, re.MULTILINE), out
    assert re.search(r'^helios_offload_row_pressure_with_page_headroom_total\{', out,
                     re.MULTILINE), out
    assert out.count('"accepted":true') == 2, out  # drain_started, then abort
    assert "WINDOW OPEN" in out, out  # the status view, while drain_started holds the window
    token = checkout / "events-token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and len(token.read_text().strip()) >= 40
    assert (checkout / "helios-state").is_dir()


def test_the_command_forms_match_the_parser() -> None:
    """Every line of the `text` block names a real command and only its real options."""
    commands = cli.commands()
    text = "\n".join(blocks("text")).replace("\\\n", " ")
    lines = [line.split("#")[0] for line in text.splitlines() if line.startswith("helios-exporter")]
    assert len(lines) >= 9
    for line in lines:
        words = line.split()
        if words[1].startswith("--"):
            assert words[1] in ("--version", "--help"), line
            continue
        command = commands.get(words[1])
        assert command is not None, f"no command {words[1]}: {line}"
        flags = re.findall(r"(?<![\w-])--[a-z][\w-]*", line)
        unknown = [f for f in flags if f not in {o.flag for o in command.options} | {"--help"}]
        assert unknown == [], f"{line}: {unknown}"
