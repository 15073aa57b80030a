"""Real processes for the experiment commands' end-to-end tests: `helios-exporter simulate
--scenario idle` at the generic geometry, `helios-exporter serve` with a one-hour poll
interval (so only the phase edges' own captures can see a probe's traffic), and the commands run
as an engineer runs them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from simulator.corpora import write_corpus
from tools.harness import PYTHON, ROOT, Procs, wait_until

TOKEN = "probe-Token-0123456789abcdef"
OTHER_MODEL = "qwen3-next-lora-support"
# Same identity in every arm, so that only the declared difference separates them.
IDENTITY = ("--seed", "1", "--image-digest", "sha256:" + "ab" * 32, "--container-id", "4be1c0ffee12")


def fresh_command(engine: str) -> str:
    return (f"{PYTHON} -c \"import httpx; httpx.post('{engine}/admin/restart', json={{'container':"
            f" 'same'}}, timeout=30).raise_for_status()\"")


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "commands", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False)


class Rig:
    """One simulated engine and one sidecar with the phases API enabled. `sidecar_args` (e.g.
    `--web-config-file`) and `access` (the access flags every command then gets, e.g. `--user`)
    put the sidecar behind TLS or basic auth; `verify` is how the test itself reaches it."""

    def __init__(self, procs: Procs, work: Path, *engine_args: str, name: str = "a",
                 sidecar_args: tuple[str, ...] = (), access: tuple[str, ...] = (),
                 verify: str | bool = True, scheme: str = "http") -> None:
        self.procs, self.work = procs, work
        self.token = work / "token"  # the sidecar's --events-token-file (read again on change)
        self.token.write_text(TOKEN + "\n")
        self.client_token = self.token  # the commands' --token-file
        self.engine_proc, self.engine = procs.simulator(
            "idle", "--time-scale", "1000", *IDENTITY, *engine_args, name=f"engine-{name}")
        self.state = work / f"state-{name}"
        self.name = name
        self.sidecar_args, self.access, self.verify, self.scheme = (
            sidecar_args, access, verify, scheme)
        self.start_sidecar()

    def start_sidecar(self) -> None:
        self.sidecar_proc, url = self.procs.sidecar(
            self.engine, "--events-token-file", str(self.token), "--poll-interval", "3600",
            *self.sidecar_args, state_dir=self.state,
            name=f"sidecar-{self.name}-{len(self.procs.procs)}", wait=False)
        self.sidecar = url.replace("http://", f"{self.scheme}://")
        wait_until(lambda: httpx.get(self.sidecar + "/readyz", verify=self.verify,
                                     timeout=2).status_code == 200,
                   self.procs.ready_timeout, f"{self.sidecar}/readyz", self.sidecar_proc)

    def restart_engine(self) -> None:
        httpx.post(self.engine + "/admin/restart", json={"container": "same"}, timeout=10)

    @property
    def fresh_command(self) -> str:
        """`probe --fresh-command` for this engine: a new incarnation in the same container."""
        return fresh_command(self.engine)

    def probe(self, out: Path, corpus: Path, *args: str,
              engine: str | None = None) -> subprocess.CompletedProcess[str]:
        return cli("probe", "--engine-url", engine or self.engine, "--sidecar", self.sidecar,
                   "--token-file", str(self.client_token), "--corpus", str(corpus), "--out",
                   str(out),
                   *self.access, *args)

    def phase(self, action: str, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return cli("phase", action, name, "--sidecar", self.sidecar, "--token-file",
                   str(self.client_token), *self.access, *args)

    def evidence(self, out: Path, *args: str, token: bool = True) -> subprocess.CompletedProcess[str]:
        """`evidence`, with the events token (the sidecar's GET needs it) unless told not to."""
        given = ("--token-file", str(self.client_token)) if token else ()
        return cli("evidence", "--sidecar", self.sidecar, "--out", str(out), *given,
                   *self.access, *args)

    def phase_names(self) -> list[str]:
        resp = httpx.get(self.sidecar + "/experiment/phases", timeout=10, verify=self.verify,
                         headers={"Authorization": f"Bearer {TOKEN}"})
        assert resp.status_code == 200, resp.text
        return [p["name"] for p in resp.json()["phases"]]

    def send(self, bodies: list[bytes]) -> None:
        with httpx.Client(base_url=self.engine, timeout=30) as client:
            for body in bodies:
                resp = client.post("/v1/completions", content=body,
                                   headers={"content-type": "application/json"})
                assert resp.status_code == 200, resp.text


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("corpora")
    out = {}
    for name, lane, model in (("probe-52", "probe-52", None), ("other", "probe-52", OTHER_MODEL),
                              ("small-12", "small-12", None)):
        with (d / f"{name}.jsonl").open("w") as f:
            write_corpus(lane, f, *(model,) if model else ())
        out[name] = d / f"{name}.jsonl"
    return out


def evidence(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "evidence.json").read_text())
    return doc


def deltas(doc: dict[str, Any], name: str) -> dict[str, Any]:
    phase = next(p for p in doc["phases"] if p["name"] == name)
    assert phase["valid"] is True, phase["invalid_reasons"]
    d: dict[str, Any] = phase["deltas"]
    return d
