"""The runbooks' blocks against a real sidecar and a real simulated engine, with the real curl, jq
and `helios-exporter status`: on the TLS example (the sidecar with a web configuration: TLS with
a certificate for 127.0.0.1 and basic auth, as deploy/kubernetes-tls sets it up) and on a plain
deployment. Only what a test machine cannot have stays recorded (kubectl, docker, amtool: the
Set up block's kubectl hands over the real CA, the scrape user's password and the token); the
Set up block's addresses are then pointed at the processes' free ports. Every read answers, every
event is answered 200, and the terminal view reads the sidecar with the credentials the Set up
block exported."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from tests.e2e.procs import Stack, stack, wait_for  # noqa: F401  (fixture)
from tests.repo.runbooks.deployments import Deployment
from tests.repo.runbooks.runbook_check import TOKEN, SetUps, reach, shim_config
from tests.repo.runbooks.runbook_doc import runbooks, setup_page
from tests.repo.runbooks.runbook_shell import Shell
from tools.pki import CA, write_web_config

pytestmark = pytest.mark.e2e

RUNBOOKS = runbooks()
PASSWORD = "runbook-Pa55word"


@pytest.mark.parametrize("dep", ["kubernetes-tls", "plain"])
def test_every_block_against_a_real_sidecar(dep: str, stack: Stack, setups: SetUps,  # noqa: F811
                                            deployments: dict[str, Deployment],
                                            tmp_path: Path) -> None:
    d = deployments[dep]
    _, engine = stack.simulator("steady")
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    common = ["--events-token-file", str(token), "--poll-interval", "0.5"]
    files: dict[str, str] = {}
    secrets: dict[str, dict[str, str]] = {}
    if d.tls is not None:
        ca = CA(tmp_path / "pki")
        web = write_web_config(tmp_path / "web.yml", server=ca.issue("sidecar", server=True),
                               users={d.tls.username: PASSWORD})
        proc, url = stack.sidecar(engine, "--web-config-file", str(web), *common, wait=False)
        sidecar = url.replace("http://", "https://")
        files[f"kubectl:helios-exporter:{d.tls.ca_file}"] = ca.path.read_text()
        secrets = {name: {k: base64.b64encode((PASSWORD if k == "password" else v).encode()).decode()
                          for k, v in data.items()} for name, data in d.tls.secrets.items()}
    else:
        proc, sidecar = stack.sidecar(engine, *common)

    # The Set up block as written, its kubectl answering with the real CA, password and token.
    runbook = RUNBOOKS[0]
    r = reach(runbook, d, setups.shell)
    config = shim_config(r, setups.sample)
    config = config | {"files": config["files"] | files, "secrets": secrets or config["secrets"]}
    ran = setups.shell.run(runbook.setup_blocks()[dep].text, config, dump=True)
    assert ran.problems() == [], ran.stderr
    prelude = ran.declared + f"SIDECAR={sidecar} ENGINE={engine}\n"

    # In a scratch folder: a block may keep the engine's snapshot in a file there.
    (tmp_path / "cwd").mkdir()
    live = Shell(tmp_path / "live", real=("curl", "helios-exporter"), cwd=tmp_path / "cwd")
    wait_for(lambda: live.run('curl -sSf "$SIDECAR/readyz"', config, prelude=prelude).returncode == 0,
             30, "the sidecar answers through the Set up's credentials", proc)
    failures, answered, phases, views = [], 0, 0, 0
    for rb in [setup_page(), *RUNBOOKS]:  # the common page shows the terminal view
        for block in rb.command_blocks(dep):
            text = block.text.replace(" --watch", "")  # the terminal view once, not until Ctrl-C
            out = live.run(text, config, prelude=prelude)
            codes = re.findall(r"^HTTP (\d+)$", out.stdout, re.M)
            # 409 with "no window is open": the documented answer of window_closed and abort on
            # this steady engine (docs/restore.md, every event in every state).
            refused = codes.count("409") if out.stdout.count('"detail":"no window is open') == \
                codes.count("409") else 0
            answered += codes.count("200") + refused
            phases += out.stdout.count('"phase":')
            views += "helios-exporter status" in text and out.returncode == 0
            problems = out.problems() + [f"HTTP {c}" for c in codes
                                       if c != "200" and not (c == "409" and refused)]
            if out.returncode != 0:
                problems.append(f"exit status {out.returncode}")
            if "UNREACHABLE" in out.stdout:
                problems.append("unreachable")
            if problems:
                failures.append(f"{rb.name} {block.where}: {problems}\n{text}{out.stdout}{out.stderr}")
    assert failures == [], "\n".join(failures)
    # The real path was taken: events answered, /status read, the terminal view shown.
    assert answered >= 4 and phases >= 5 and views >= 1, (answered, phases, views)
