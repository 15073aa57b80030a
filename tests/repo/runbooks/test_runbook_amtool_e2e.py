"""The runbooks' amtool commands against a real Alertmanager (the project's config): pasted as
written after each deployment's Set up block (only AM_URL pointed at the test's Alertmanager; that
it names the deployment's own is tests/repo/runbooks/test_runbooks.py's job), a `silence add` silences
exactly the paged alert (not another check, instance or cluster), with an empty CLUSTER (one
Prometheus per cluster) and with one; the `silence query` / `silence expire` block ends it."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT
from tests.e2e.procs import Stack, free_port, stack  # noqa: F401  (fixture)
from tests.repo.runbooks.deployments import DEPLOYMENTS, Deployment
from tests.repo.runbooks.runbook_check import SetUps
from tests.repo.runbooks.runbook_doc import runbooks
from tests.repo.runbooks.runbook_shell import Shell

RUNBOOKS = [r for r in runbooks() if any("amtool" in b.text for b in r.shell_blocks())]


def _am_config(tmp: Path) -> str:
    text = (ROOT / "deploy" / "alertmanager" / "alertmanager-test.yml").read_text(encoding="utf-8")
    return text.replace("__WEBHOOK_PORT__", str(free_port())).replace(
        "__TEMPLATE_DIR__", str(ROOT / "deploy" / "alertmanager"))


def _post(am: str, labels: list[dict[str, str]]) -> None:
    ends = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    httpx.post(f"{am}/api/v2/alerts", json=[{"labels": lb, "endsAt": ends} for lb in labels],
               timeout=5).raise_for_status()


def _states(am: str) -> dict[tuple[tuple[str, str], ...], str]:
    alerts = httpx.get(f"{am}/api/v2/alerts", timeout=5).json()
    return {tuple(sorted(a["labels"].items())): a["status"]["state"] for a in alerts}


def _key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _wait(am: str, want: dict[tuple[tuple[str, str], ...], str]) -> dict[Any, str]:
    deadline = time.monotonic() + 10
    while True:
        states = _states(am)
        got = {k: states.get(k) for k in want}
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


@pytest.mark.e2e
@pytest.mark.parametrize("cluster", ["", "eu-west-1a"], ids=["no-cluster", "cluster"])
@pytest.mark.parametrize("runbook", RUNBOOKS, ids=[r.name for r in RUNBOOKS])
def test_amtool_blocks_silence_exactly_the_paged_alert(
        runbook: Any, cluster: str, stack: Stack, setups: SetUps,  # noqa: F811
        deployments: dict[str, Deployment], tmp_path: Path) -> None:
    _, am = stack.alertmanager(_am_config(tmp_path))
    shell = Shell(tmp_path / "shell", real=("amtool",))
    blocks = [b for b in runbook.shell_blocks() if "amtool" in b.text]
    assert any("silence add" in b.text for b in blocks)
    assert any("silence expire" in b.text for b in blocks)
    for dep in DEPLOYMENTS:
        d = deployments[dep]
        setup = setups(runbook, dep)
        prelude = setup.alive.declared + f"AM_URL={am}\nCLUSTER={cluster}\n"
        (check,) = {m for b in blocks for m in re.findall(r"^CHECK=(\w+)", b.text, re.M)}
        paged = {"alertname": runbook.name, "job": d.job, "instance": d.instance,
                 "severity": "critical", "check": check} | ({"cluster": cluster} if cluster else {})
        others = [paged | {"check": "image"}, paged | {"instance": d.instance + "-other"},
                  paged | {"cluster": cluster + "-other" if cluster else "eu-west-1a"}]
        _post(am, [paged, *others])
        everyone_active = {_key(lb): "active" for lb in [paged, *others]}
        assert _wait(am, everyone_active) == everyone_active
        for block in blocks:
            ran = shell.run(block.text, {"files": {}, "pod": "x", "sidecars": [], "engines": [],
                                         "responses": {}}, prelude=prelude)
            assert ran.returncode == 0 and "error" not in ran.stderr.lower(), \
                f"{dep}, {block.where}:\n{block.text}\n{ran.stderr}"
            if "silence add" in block.text:
                want = everyone_active | {_key(paged): "suppressed"}
                assert _wait(am, want) == want, f"{dep}: the silence of {block.where}"
            if "silence expire" in block.text:
                assert _wait(am, everyone_active) == everyone_active, \
                    f"{dep}: {block.where} did not end the silence"
        silences = httpx.get(f"{am}/api/v2/silences", timeout=5).json()
        assert [s for s in silences if s["status"]["state"] == "active"] == [], dep
