"""Every shell block of every runbook, pasted into bash after the deployment's Set up block
(tests/repo/runbooks/test_runbooks.py has the method): it runs as written against a sidecar that answers,
and says UNREACHABLE, never nothing, against one that does not."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.repo.runbooks.deployments import DEPLOYMENTS
from tests.repo.runbooks.runbook_check import UNREACHABLE, Sample, SetUps, call_problems
from tests.repo.runbooks.runbook_doc import Runbook, runbooks, setup_page

RUNBOOKS = runbooks()
PAGES = [setup_page(), *RUNBOOKS]  # the common set-up page's other blocks too (the status view)
EVENTS = ("drain_started", "restore_started", "window_closed", "abort")


def cases() -> list[Any]:
    return [pytest.param(runbook, dep, id=f"{runbook.name}-{dep}")
            for runbook in PAGES for dep in DEPLOYMENTS]


@pytest.mark.parametrize(("runbook", "dep"), cases())
def test_every_block_runs_as_written(runbook: Runbook, dep: str, setups: SetUps,
                                     sample: Sample) -> None:
    r = setups(runbook, dep).reach
    failures = []
    for block in runbook.command_blocks(dep):
        ran = setups.run(runbook, dep, block)
        events: list[str] = []
        problems = ran.problems() + [p for call in ran.calls
                                     for p in call_problems(call, r, sample, events)]
        if ran.returncode != 0:
            problems.append(f"exit status {ran.returncode}")
        if UNREACHABLE in ran.stdout:
            problems.append("says the sidecar is unreachable while it answers")
        if re.search(r"\bnull\b", ran.stdout):
            problems.append("printed null: it reads a field the sidecar or engine does not have")
        if problems:
            failures.append(f"{block.where}:\n{block.text}-> {problems}\n{ran.stderr}")
    assert failures == [], "\n".join(failures)


@pytest.mark.parametrize(("runbook", "dep"), cases())
def test_commands_fail_loudly_on_a_dead_sidecar(runbook: Runbook, dep: str,
                                               setups: SetUps) -> None:
    """Each call to a sidecar (or engine) that refuses connections says so, never an empty
    answer: with jq 1.6, `curl -sf URL | jq ...` prints nothing and succeeds."""
    r = setups(runbook, dep).reach
    failures = []
    for block in runbook.command_blocks(dep):
        ran = setups.run(runbook, dep, block, dead=True)
        tries = sum(1 for c in ran.calls if c.name == "curl"
                    and any(a.startswith((r.sidecar, r.engine)) for a in c.argv))
        said = ran.stdout.count("UNREACHABLE: ")
        if said < tries:
            failures.append(f"{block.where}: {tries} call(s) to a dead sidecar or engine, "
                            f"{said} said UNREACHABLE:\n{ran.stdout}")
    assert failures == [], "\n".join(failures)


def test_the_restore_checklist_sends_every_event(setups: SetUps, sample: Sample) -> None:
    """HeliosRestoreWindowOpen's checklist has a command for each restore event, accepted by the
    events API, on every deployment."""
    (runbook,) = [r for r in RUNBOOKS if r.name == "HeliosRestoreWindowOpen"]
    for dep in DEPLOYMENTS:
        r = setups(runbook, dep).reach
        events: list[str] = []
        for block in runbook.command_blocks(dep):
            for call in setups.run(runbook, dep, block).calls:
                call_problems(call, r, sample, events)
        assert set(events) == set(EVENTS), dep
