"""Holding a runbook's shell blocks against a deployment: where its Set up block must point
(`reach`), the shim configuration that stands in for what it reaches, and the problems of each
recorded call (`call_problems`): a curl to no real route or with the wrong token or a body the
events API refuses, kubectl outside the example's namespace, containers or labels, docker
outside the Compose file, amtool without its Alertmanager, a helios-exporter line the CLI
refuses."""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

from commands.cli import parse as cli_parse
from exporter.restore.events import RestoreEventIn
from tests.conftest import ROOT
from tests.helpers import contract_example
from tests.repo.runbooks.deployments import Deployment
from tests.repo.runbooks.runbook_doc import Block, Runbook
from tests.repo.runbooks.runbook_shell import Call, Ran, Shell
from tests.repo.runbooks.status_sample import render, without_nulls

TOKEN = "token-from-the-mounted-file-0123456789"
CA = "-----BEGIN CERTIFICATE-----\nthe issuer's CA, as mounted in the sidecar\n-----END CERTIFICATE-----\n"
UNSET = "unset-in-sample"   # what a null of the sample /status reads as
UNREACHABLE = "SIDECAR UNREACHABLE"
AM_PORT = 9093
# Services a person may port-forward to reach the Alertmanager on Kubernetes: the one the
# Prometheus Operator creates for every Alertmanager, and the one deploy/prometheus names.
AM_SERVICES = {"svc/alertmanager-operated", "svc/alertmanager"}
# The engine API the runbooks may call: the simulator serves the engine's routes.
ENGINE_PATHS = {"/debug/offload/snapshot", "/health", "/metrics"}



@dataclass(frozen=True)
class Sample:
    status: dict[str, Any]           # as a real sidecar answers it
    routes: frozenset[tuple[str, str]]
    files: dict[str, str]            # shim responses: "METHOD PATH" -> body file


def make_sample(tmp: Path) -> Sample:
    """A real sidecar's /status and event answer (nulls made visible: `UNSET`), its routes,
    and the contract's example snapshot for the engine, as files the curl shim answers with."""
    (tmp / "state").mkdir()
    rendered = render(tmp / "state")
    status = tmp / "status.json"
    status.write_text(json.dumps(without_nulls(rendered.status, UNSET)))
    event = tmp / "event.json"
    event.write_text(json.dumps(rendered.event_answer))
    snapshot = tmp / "snapshot.json"
    snapshot.write_text(json.dumps(without_nulls(contract_example(), UNSET)))
    ok = tmp / "ok.json"
    ok.write_text('{"status": "ok"}\n')
    files = {"GET /status": status, "POST /restore/events": event, "GET /healthz": ok,
             "GET /readyz": ok, "GET /": ok,
             # A real sidecar's whole /metrics (tests/exporter/test_full_exposition.py keeps it so).
             "GET /metrics": ROOT / "tests" / "golden" / "full_exposition.prom",
             "engine /debug/offload/snapshot": snapshot, "engine /health": ok,
             "engine /metrics": ok}
    return Sample(rendered.status, rendered.routes, {k: str(v) for k, v in files.items()})


@dataclass(frozen=True)
class Reach:
    """Where, on one deployment, the Set up block must point its variables."""

    deployment: Deployment
    sidecar: str
    engine: str
    am_url: str
    token_files: dict[str, str]   # shim "files"


def _forwards(calls: list[Call]) -> dict[str, dict[int, int]]:
    """kubectl port-forward target -> {remote port: local port}."""
    out: dict[str, dict[int, int]] = {}
    for call in calls:
        if call.name == "kubectl" and "port-forward" in call.argv:
            args = [a for a in call.argv[call.argv.index("port-forward") + 1:]
                    if not a.startswith("-")]
            target, ports = args[0], args[1:]
            out[target] = {int(p.split(":")[1]): int(p.split(":")[0]) for p in ports}
    return out


def reach(runbook: Runbook, dep: Deployment, shell: Shell) -> Reach:
    """The addresses the deployment gives a person (from its manifests; on Kubernetes through
    the ports the Set up block forwards, which must be the pod's and the Alertmanager's)."""
    setups = runbook.setup_blocks()
    assert dep.name in setups, f"{runbook.name}: no Set up block for {dep.name}"
    block = setups[dep.name]
    files = {key: TOKEN + "\n" for key in dep.token_files}
    if dep.name == "plain":
        match = re.search(r"^TOKEN_FILE=(\S+)\s+#.*--events-token-file", block.text, re.M)
        assert match, f"{runbook.name}: the plain Set up reads TOKEN_FILE, the sidecar's --events-token-file"
        files[f"cat:{match.group(1)}"] = TOKEN + "\n"
    if dep.tls is not None:
        files[f"kubectl:helios-exporter:{dep.tls.ca_file}"] = CA
    if dep.namespace is not None:
        ran = shell.run(block.text, {"files": files, "pod": "x", "sidecars": [], "engines": [],
                                     "responses": {}, "secrets": secrets(dep)})
        forwards = _forwards(ran.calls)
        pods = [ports for target, ports in forwards.items() if target.startswith("pod/")]
        ams = [ports for target, ports in forwards.items() if target in AM_SERVICES]
        assert len(pods) == 1, f"{runbook.name}: one port-forward to the pod, got {forwards}"
        assert len(ams) == 1, f"{runbook.name}: one port-forward to {AM_SERVICES}, got {forwards}"
        assert set(pods[0]) == {dep.sidecar_port, dep.engine_port}, pods[0]
        assert set(ams[0]) == {AM_PORT}, ams[0]
        return Reach(dep, f"{dep.scheme}://127.0.0.1:{pods[0][dep.sidecar_port]}",
                     f"http://127.0.0.1:{pods[0][dep.engine_port]}",
                     f"http://127.0.0.1:{ams[0][AM_PORT]}", files)
    if dep.name == "compose":
        (am,) = dep.alertmanagers
        return Reach(dep, f"http://127.0.0.1:{dep.published['exporter'][dep.sidecar_port]}",
                     f"http://127.0.0.1:{dep.published['engine'][dep.engine_port]}",
                     f"http://127.0.0.1:{dep.published[am.split(':')[0]][int(am.split(':')[1])]}",
                     files)
    (am,) = dep.alertmanagers
    host = dep.instance.rpartition(":")[0]
    return Reach(dep, f"http://{dep.instance}", f"http://{host}:{dep.engine_port}", f"http://{am}",
                 files)


def secrets(dep: Deployment) -> dict[str, dict[str, str]]:
    """The Secrets a person may read on `dep`, as `kubectl get secret -o jsonpath` prints them."""
    if dep.tls is None:
        return {}
    return {name: {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
            for name, data in dep.tls.secrets.items()}


def shim_config(r: Reach, sample: Sample, dead: bool = False) -> dict[str, Any]:
    return {"files": r.token_files, "pod": "helios-engine-a-7d9f8b6c5d-x2x4z",
            "sidecars": [r.sidecar], "engines": [r.engine], "dead": dead,
            "responses": {k: [200, v] for k, v in sample.files.items()},
            "secrets": secrets(r.deployment)}


# -- checking one call against the deployment ------------------------------------------------------

def _option(argv: list[str], *names: str) -> list[str]:
    """Values of an option given as `--x v`, `--x=v` or `-x v`."""
    values = []
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                values.append(argv[i + 1])
            elif arg.startswith(name + "=") and name.startswith("--"):
                values.append(arg.split("=", 1)[1])
    return values


def _curl(call: Call, r: Reach, sample: Sample, events: list[str]) -> list[str]:
    argv = call.argv
    urls = [a for a in argv if a.startswith(("http://", "https://"))]
    if len(urls) != 1:
        return [f"curl without exactly one URL: {argv}"]
    url = urls[0]
    path = urlsplit(url).path or "/"
    data = _option(argv, "-d", "--data", "--data-raw")
    method = (_option(argv, "-X", "--request") or ["POST" if data else "GET"])[0]
    flags = "".join(a[1:] for a in argv if a.startswith("-") and not a.startswith("--"))
    loud = "f" in flags or "--fail" in argv or "--fail-with-body" in argv or any(
        "http_code" in w for w in _option(argv, "-w", "--write-out"))
    problems = []
    if url.startswith(r.engine):
        if path not in ENGINE_PATHS:
            problems.append(f"{path} is not an engine route ({sorted(ENGINE_PATHS)})")
    elif url.startswith(r.sidecar):
        if (method, path) not in sample.routes:
            problems.append(f"{method} {path} is not a sidecar route ({sorted(sample.routes)})")
        if not loud:
            problems.append(f"{method} {path}: HTTP errors pass silently (no -f, no -w %{{http_code}})")
        problems += _tls_problems(r, _option(argv, "--cacert"), _option(argv, "-u", "--user"))
        if (method, path) == ("POST", "/restore/events"):
            headers = _option(argv, "-H", "--header")
            if f"Authorization: Bearer {TOKEN}" not in headers:
                problems.append(f"the events token is not the mounted one: {headers}")
            if "Content-Type: application/json" not in headers:
                problems.append("POST without Content-Type: application/json")
            try:
                events.append(RestoreEventIn.model_validate_json(data[0]).event)
            except (ValueError, IndexError) as exc:
                problems.append(f"the event body is refused by the events API: {data}: {exc}")
    else:
        problems.append(f"curl to {url}: neither the sidecar ({r.sidecar}) nor the engine ({r.engine})")
    return problems


def _tls_problems(r: Reach, ca_files: list[str], users: list[str]) -> list[str]:
    """With TLS and basic auth, a request to the sidecar trusts the issuer's CA (as mounted in
    the sidecar) and sends a user and password the web configuration accepts."""
    tls = r.deployment.tls
    if tls is None:
        return []
    problems = []
    if urlsplit(r.sidecar).hostname not in tls.names:
        problems.append(f"{r.sidecar}: the certificate names {sorted(tls.names)}")
    if len(ca_files) != 1 or not Path(ca_files[0]).is_file() or Path(ca_files[0]).read_text() != CA:
        problems.append(f"the CA is not the sidecar's ({ca_files})")
    if users != [f"{tls.username}:{tls.password}"]:
        problems.append(f"the user is not one the web configuration accepts ({users})")
    return problems


def _kubectl(call: Call, r: Reach) -> list[str]:
    dep, argv = r.deployment, call.argv
    problems = []
    namespaces = _option(argv, "-n", "--namespace")
    forward = _forwards([call])
    if forward and next(iter(forward)) in AM_SERVICES:
        if namespaces != ["monitoring"]:
            problems.append(f"the Alertmanager is forwarded from {namespaces}, not monitoring")
        return problems
    if namespaces != [dep.namespace]:
        problems.append(f"kubectl in namespace {namespaces}, the example's is {dep.namespace}: {argv}")
    for container in _option(argv, "-c", "--container"):
        if container not in dep.containers:
            problems.append(f"no container {container} in the pod ({sorted(dep.containers)})")
    for selector in _option(argv, "-l", "--selector"):
        key, _, value = selector.partition("=")
        if dep.pod_labels.get(key) != value:
            problems.append(f"no pod label {selector} in the example ({dep.pod_labels})")
    for target in forward:
        if not target.startswith("pod/"):
            problems.append(f"port-forward to {target}")
    words = [a for a in argv if not a.startswith("-")]
    if "get" in words and "secret" in " ".join(words):
        readable = set(secrets(dep))
        if not any(w.removeprefix("secret/") in readable for w in words):
            problems.append(f"reads a Secret the deployment does not have ({sorted(readable)}): {argv}")
    if "exec" in argv and "--" in argv:
        command = argv[argv.index("--") + 1:]
        if command[:1] == ["helios-exporter"]:
            problems += _helios_exporter(Call("helios-exporter", command[1:], call.cwd))
            inside = f"http://127.0.0.1:{dep.sidecar_port}"
            problems += [f"inside the pod the sidecar is {inside}, not {url}"
                         for url in _option(command, "--sidecar") if url != inside]
    return problems


def _docker(call: Call, r: Reach) -> list[str]:
    dep, argv = r.deployment, call.argv
    if argv[:3] != ["compose", "-f", dep.compose_file]:
        return [f"docker without `compose -f {dep.compose_file}`: {argv}"]
    if not (ROOT / argv[2]).is_file():
        return [f"{argv[2]} does not exist"]
    rest = [a for a in argv[3:] if not a.startswith("-")]
    if rest and rest[0] in ("exec", "logs", "restart", "ps", "start", "stop") and len(rest) > 1 \
            and rest[1] not in dep.published:
        return [f"no Compose service {rest[1]} ({sorted(dep.published)})"]
    if "exec" in argv and "-T" not in argv and "cat" in argv:
        return ["`docker compose exec` without -T: the TTY adds a carriage return to the token"]
    return []


def _amtool(call: Call, r: Reach) -> list[str]:
    urls = _option(call.argv, "--alertmanager.url")
    if urls != [r.am_url]:
        return [f"amtool must name the Alertmanager (--alertmanager.url={r.am_url}): {call.argv}"]
    return []


def _helios_exporter(call: Call, r: Reach | None = None) -> list[str]:
    """The real CLI parses the line, with the HELIOS_EXPORTER_* variables it was run with."""
    try:
        with mock.patch.dict(os.environ, call.env):
            args = cli_parse(call.argv)
    except SystemExit as exc:
        return [f"helios-exporter {' '.join(call.argv)}: the CLI refuses it (exit {exc.code})"]
    sidecar = getattr(args, "sidecar", None)
    if r is None or sidecar is None:
        return []
    if sidecar != r.sidecar:
        return [f"helios-exporter --sidecar {sidecar}: the sidecar is {r.sidecar} here"]
    name, password, ca = (getattr(args, a, None) for a in ("user", "password_file", "ca_file"))
    user = None if name is None else f"{name}:{password.read_text().strip() if password else ''}"
    return _tls_problems(r, [] if ca is None else [str(ca)], [] if user is None else [user])


def call_problems(call: Call, r: Reach, sample: Sample, events: list[str]) -> list[str]:
    if call.name == "curl":
        return _curl(call, r, sample, events)
    if call.name == "kubectl":
        if r.deployment.namespace is None:
            return [f"kubectl on {r.deployment.name}: {call.argv}"]
        return _kubectl(call, r)
    if call.name == "docker":
        if r.deployment.name != "compose":
            return [f"docker on {r.deployment.name}: {call.argv}"]
        return _docker(call, r)
    if call.name == "amtool":
        return _amtool(call, r)
    if call.name == "helios-exporter":
        return _helios_exporter(call, r)
    return []


@dataclass(frozen=True)
class SetUp:
    """A Set up block run once on its deployment: where it must point, what it did, and the
    variables it left (a prelude for every later block, as if pasted after it)."""

    reach: Reach
    alive: Ran
    dead: Ran


class SetUps:
    """Every distinct Set up block is run once per deployment (they are generated, so equal in
    every runbook); the later blocks start from the variables it left."""

    def __init__(self, shell: Shell, deployments: dict[str, Deployment], sample: Sample) -> None:
        self.shell, self.deployments, self.sample = shell, deployments, sample
        self._done: dict[tuple[str, str], SetUp] = {}

    def __call__(self, runbook: Runbook, dep: str) -> SetUp:
        setups = runbook.setup_blocks()
        assert dep in setups, f"{runbook.name}: no Set up block for {dep}"
        key = (setups[dep].text, dep)
        if key not in self._done:
            r = reach(runbook, self.deployments[dep], self.shell)
            alive = self.shell.run(setups[dep].text, shim_config(r, self.sample), dump=True)
            dead = self.shell.run(setups[dep].text, shim_config(r, self.sample, dead=True))
            self._done[key] = SetUp(r, alive, dead)
        return self._done[key]

    def run(self, runbook: Runbook, dep: str, block: Block, dead: bool = False) -> Ran:
        setup = self(runbook, dep)
        return self.shell.run(block.text, shim_config(setup.reach, self.sample, dead),
                              prelude=setup.alive.declared)

