"""docs/adding-a-metric.md, followed as written in a clean clone of HEAD.

The clone gets the page's blocks applied (tests/repo/walkthrough.py reads them: a change to the
page changes what this test does), then the commands under "Then" run in it as the page gives
them: `scripts/generate`, then the page's own pytest command. The clone reuses the suite's
virtualenv (linked as its .venv) instead of bootstrapping one; PYTHONPATH names the clone so that
every process imports the clone's code, not the editable install's. Uncommitted work is not in
HEAD: this tests what a fresh checkout has.

Two more cases each leave one step out (the runbook, the simulator's line) and show the page's
commands then fail, each where it should, so the first case's pass means something.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.repo import walkthrough

# The walks run git, scripts/generate and pytest in subprocesses (e2e). The page's tests took
# 220 s on a 2-core machine at a load of 8: pyproject's 300 s per test is too short for them.
COMMAND_TIMEOUT = 600

ROOT = Path(__file__).resolve().parents[2]
MAX_HAND_EDITS = 10  # a metric, its panel and its alert in at most 10 files by hand


def _env(clone: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "COV_")) and k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(clone)
    return env


def _run(argv: list[str] | str, cwd: Path, timeout: float = COMMAND_TIMEOUT
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=_env(cwd), shell=isinstance(argv, str),
                          capture_output=True, text=True, timeout=timeout, check=False)


def _clone(tmp_path: Path) -> Path:
    """A clean clone of this checkout's HEAD, with the running virtualenv as its .venv."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    clone = tmp_path / "clone"
    done = subprocess.run(["git", "-C", str(ROOT), "clone", "--quiet", str(ROOT), str(clone)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    venv = Path(sys.prefix)
    assert (venv / "bin" / "pytest").exists(), f"the suite's virtualenv {venv} has no pytest"
    (clone / ".venv").symlink_to(venv, target_is_directory=True)
    return clone


def _changed(clone: Path) -> set[str]:
    """The files that differ from HEAD (new ones included), the .venv link excluded."""
    out = _run(["git", "status", "--porcelain", "--untracked-files=all"], clone, 60)
    assert out.returncode == 0, out.stderr
    return {line[3:] for line in out.stdout.splitlines()} - {".venv"}


def _names(steps: list[walkthrough.Step]) -> tuple[str, str]:
    """The family and the alert the page adds, from its own blocks."""
    family = re.findall(r'Family\("(\w+)"', "".join(s.added() for s in steps
                                                    if s.path.startswith("exporter/catalogue/")))
    alert = re.findall(r'name="(\w+)"', "".join(s.added() for s in steps
                                               if s.path.startswith("alerts/groups/")))
    assert len(family) == 1 and len(alert) == 1, (family, alert)
    return family[0], alert[0]


def _follow(clone: Path, skip: str | None = None) -> tuple[list[walkthrough.Step], list[str]]:
    """Apply the page's steps in the clone (all but the one whose title is `skip`); return them
    and the page's commands."""
    text = (clone / walkthrough.DOC).read_text(encoding="utf-8")
    steps = walkthrough.steps(text)
    assert skip is None or skip in {s.title for s in steps}, f"no step titled {skip!r}"
    for step in steps:
        if step.title != skip:
            walkthrough.apply(step, clone)
    return steps, walkthrough.commands(text)


def test_the_pages_blocks_apply_to_this_tree(tmp_path: Path) -> None:
    """Quick, without a process: each step's blocks apply to this tree's files (a copy of
    them), each step a file of its own, as many as the page says."""
    text = (ROOT / walkthrough.DOC).read_text(encoding="utf-8")
    steps = walkthrough.steps(text)
    for step in steps:
        (tmp_path / step.path).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / step.path).exists():
            (tmp_path / step.path).write_bytes((ROOT / step.path).read_bytes())
        walkthrough.apply(step, tmp_path)
    assert len({s.path for s in steps}) == len(steps) == walkthrough.stated_count(text)
    assert len(steps) <= MAX_HAND_EDITS
    assert len(walkthrough.commands(text)) == 2


@pytest.mark.e2e
@pytest.mark.timeout(2 * COMMAND_TIMEOUT)
def test_the_page_is_followed_word_for_word(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    text = (clone / walkthrough.DOC).read_text(encoding="utf-8")
    steps, commands = _follow(clone)
    family, alert = _names(steps)

    # The files edited by hand: exactly the steps' files, as many as the page says, at most 10.
    by_hand = _changed(clone)
    assert by_hand == {s.path for s in steps}
    assert len(by_hand) == walkthrough.stated_count(text) <= MAX_HAND_EDITS

    # "Then": scripts/generate, and the page's test command, each as the page writes it.
    assert commands[0] == "scripts/generate", commands
    assert len(commands) == 2 and commands[1].startswith(".venv/bin/pytest "), commands
    generate = _run(commands[0], clone)
    assert generate.returncode == 0, generate.stdout[-5000:] + generate.stderr[-5000:]
    generated = _changed(clone) - by_hand
    assert len(generated) == walkthrough.stated_generated(text), sorted(generated)
    started = time.monotonic()
    tests = _run(commands[1], clone)
    seconds = time.monotonic() - started
    assert tests.returncode == 0, tests.stdout[-20_000:] + tests.stderr[-5000:]
    print(f"the page's test command passed in {seconds:.0f} s; scripts/generate wrote "
          f"{len(generated)} files")

    # What the page promises the regeneration shows: the family in the goldens and the README's
    # table, the alert in the shipped rules, the runbook's Set up filled in.
    assert family in (clone / "README.md").read_text(encoding="utf-8")
    assert any(family in p.read_text(encoding="utf-8")
               for p in (clone / "tests" / "golden").glob("*.prom"))
    assert any(f"alert: {alert}" in p.read_text(encoding="utf-8")
               for p in (clone / "alerts").glob("*.yaml"))
    runbook = next(s.path for s in steps if s.creates)
    setup = (clone / runbook).read_text(encoding="utf-8").split("BEGIN GENERATED: setup", 1)[1]
    assert "[runbooks' set-up](README.md#set-up)" in setup.split("END GENERATED: setup", 1)[0]
    assert "helios-exporter status" in (clone / runbook).parent.joinpath("README.md").read_text(
        encoding="utf-8")
    assert {"README.md", "docs/interface.md", "alerts/helios-alerts.yaml"} <= generated


# A step left out, the command of "Then" that must fail (0: scripts/generate, 1: the tests),
# and what its output must name.
LEFT_OUT = [
    pytest.param("The runbook", 0, "HeliosOffloadHostStoreRetrying", id="runbook"),
    pytest.param("The simulator", 1, "store_retries", id="simulator"),
]


@pytest.mark.e2e
@pytest.mark.timeout(2 * COMMAND_TIMEOUT)
@pytest.mark.parametrize(("step", "failing", "named"), LEFT_OUT)
def test_a_step_left_out_fails_the_pages_commands(tmp_path: Path, step: str, failing: int,
                                                  named: str) -> None:
    """The same walk without one step: the page's commands fail where they should and say
    why (without the runbook `scripts/generate` stops; without the simulator's line its v3
    fixtures lack the field and the tests fail)."""
    clone = _clone(tmp_path)
    _, commands = _follow(clone, skip=step)
    # `-x`: the tests stop at their first failure (the whole run is the first test's).
    failed, output = None, ""
    for index, command in enumerate([*commands[:-1], commands[-1] + " -x"]):
        done = _run(command, clone)
        output = done.stdout[-20_000:] + done.stderr[-5000:]
        if done.returncode != 0:
            failed = index
            break
    assert failed is not None, f"the page's commands passed without {step!r}:\n{output}"
    assert failed == failing and named in output, f"command {failed} failed:\n{output}"
