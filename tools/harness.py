"""What tests and benchmarks share: free ports, child processes on 127.0.0.1 (the simulator, the
sidecar, Prometheus, Alertmanager), waiting for them, reading an exposition back, and an engine
served in memory for an in-process sidecar.

No pytest here: a benchmark reports a failure as a result ("not measured: why"), so waits raise
`WaitFailed` and a missing program `NotInstalled`; tests/e2e/procs.py turns those into test
failures. Every process started through `Procs` is stopped by `Procs.stop_all()` (SIGTERM, then
SIGKILL after a grace period).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
# The example snapshot of docs/interface.md, which tests and benchmarks serve.
CONTRACT_EXAMPLE = ROOT / "tests" / "fixtures" / "snapshots" / "contract_example.json"
# Schema 3 with every field: the v1 example's fields unchanged, every v3 addition present.
CONTRACT_EXAMPLE_V3 = CONTRACT_EXAMPLE.with_name("contract_example_v3.json")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- processes --------------------------------------------------------------------------------
@dataclass
class Proc:
    name: str
    args: list[str]
    log: Path  # stdout and stderr
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's environment
    popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self) -> Proc:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            )
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Signal it and wait; SIGKILL after `timeout`. The exit status (None: never started)."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


class Procs:
    """The processes of one test or benchmark section, stopped in reverse order."""

    ready_timeout = 60.0  # seconds a started engine or sidecar may take to answer

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.procs: list[Proc] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Proc:
        proc = Proc(name, args, self.workdir / f"{name}.log", env or {}).start()
        self.procs.append(proc)
        return proc

    def simulator(self, scenario: str = "steady", *extra: str, port: int | None = None,
                  name: str | None = None, wait: bool = True) -> tuple[Proc, str]:
        """`helios-exporter simulate`; returns the process and its base URL."""
        port = port or free_port()
        proc = self.start(name or f"engine-{port}", [
            PYTHON, "-m", "commands", "simulate", "--listen", f"127.0.0.1:{port}",
            "--scenario", scenario, *extra])
        url = f"http://127.0.0.1:{port}"
        if wait:
            wait_http(url + "/health", self.ready_timeout, proc)
        return proc, url

    def sidecar(self, engine_url: str, *extra: str, port: int | None = None,
                state_dir: Path | None = None, name: str = "sidecar",
                env: dict[str, str] | None = None, wait: bool = True) -> tuple[Proc, str]:
        """`helios-exporter serve` (no NVML, JSON logs); waits for /readyz unless told not to."""
        port = port or free_port()
        state_dir = state_dir or self.workdir / f"{name}-state"
        proc = self.start(name, [
            PYTHON, "-m", "exporter", "serve", "--engine-url", engine_url,
            "--listen", f"127.0.0.1:{port}", "--state-dir", str(state_dir), "--no-nvml",
            "--log-format", "json", *extra], env=env)
        url = f"http://127.0.0.1:{port}"
        if wait:
            wait_http(url + "/readyz", self.ready_timeout, proc)
        return proc, url

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                proc.stop()


class NotInstalled(RuntimeError):
    """A program scripts/bootstrap installs is not on PATH."""


def need(binary: str) -> str:
    """The path of `binary`; NotInstalled when it is not on PATH."""
    path = shutil.which(binary)
    if path is None:
        raise NotInstalled(f"{binary} not on PATH: scripts/bootstrap installs it")
    return path


class Stack(Procs):
    """Procs plus a real Prometheus and Alertmanager on 127.0.0.1."""

    ready_timeout = 30.0

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.tmp = tmp

    def prometheus(self, targets: list[str], rule_files: list[Path] = (),  # type: ignore[assignment]
                   alertmanager: str | None = None, interval: str = "1s",
                   scrape_configs: str | None = None) -> tuple[Proc, str]:
        """Scraping `targets` as job helios-exporter, or what `scrape_configs` (YAML, the whole
        section) says."""
        port = free_port()
        config = self.tmp / f"prometheus-{port}.yml"
        lines = [f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"]
        if alertmanager:
            lines.append("alerting:\n  alertmanagers:\n    - static_configs:\n"
                         f"        - targets: ['{alertmanager}']\n")
        if rule_files:
            lines.append("rule_files:\n" + "".join(f"  - {r}\n" for r in rule_files))
        lines.append(scrape_configs or (
            "scrape_configs:\n  - job_name: helios-exporter\n    static_configs:\n"
            f"      - targets: {targets!r}\n"))
        config.write_text("".join(lines))
        proc = self.start("prometheus", [
            need("prometheus"), f"--config.file={config}",
            f"--storage.tsdb.path={self.tmp / f'prom-{port}'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ])
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(url + "/-/ready"), 60, "prometheus ready", proc)
        return proc, url

    def alertmanager(self, config_text: str, port: int | None = None) -> tuple[Proc, str]:
        """A real Alertmanager on 127.0.0.1 with this config, clustering disabled."""
        port = port or free_port()
        config = self.tmp / f"alertmanager-{port}.yml"
        config.write_text(config_text)
        binary = shutil.which("prometheus-alertmanager") or need("alertmanager")
        proc = self.start(f"alertmanager-{port}", [
            binary, f"--config.file={config}", f"--storage.path={self.tmp / f'am-{port}'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
        ])
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(url + "/-/ready"), 60, "alertmanager ready", proc)
        return proc, url


def query(prom: str, expr: str) -> list[dict[str, Any]]:
    """The result of an instant query."""
    resp = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=5.0)
    resp.raise_for_status()
    result: list[dict[str, Any]] = resp.json()["data"]["result"]
    return result


# -- waiting ----------------------------------------------------------------------------------
class WaitFailed(RuntimeError):
    """A condition did not hold in time, or the process it depended on exited."""


def wait_until(check: Callable[[], Any], timeout: float, what: str, proc: Proc | None = None,
               interval: float = 0.2) -> Any:
    """Call `check` until it returns something true, and return that; a connection error or a
    missing key counts as not yet."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, KeyError, IndexError, ValueError):
            last = check()
            if last:
                return last
        if proc is not None and proc.popen is not None and proc.popen.poll() is not None:
            raise WaitFailed(f"{proc.name} exited while waiting for {what}:\n{proc.tail()}")
        time.sleep(interval)
    extra = f"\n{proc.name} log:\n{proc.tail()}" if proc else ""
    raise WaitFailed(f"timed out after {timeout}s waiting for {what} (last: {last!r}){extra}")


def http_ok(url: str) -> bool:
    return httpx.get(url, timeout=2.0).status_code == 200


def wait_http(url: str, timeout: float, proc: Proc | None = None) -> None:
    """Until `url` answers 200."""
    wait_until(lambda: http_ok(url), timeout, url, proc)


# -- expositions ------------------------------------------------------------------------------
def families(text: str | bytes) -> dict[str, Metric]:
    """An exposition parsed by prometheus_client's own parser (raises on invalid text), by family
    name (a counter's without `_total`)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams: dict[str, Metric], family: str, **labels: str) -> float | None:
    """The first sample of `family` carrying `labels` (others may differ); None when absent."""
    fam = fams.get(family)
    for s in () if fam is None else fam.samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    return None


# -- an engine in memory ---------------------------------------------------------------------
def contract_example(version: int = 1) -> dict[str, Any]:
    """The contract example snapshot of schema `version` (1 or 3)."""
    path = CONTRACT_EXAMPLE_V3 if version == 3 else CONTRACT_EXAMPLE
    data: dict[str, Any] = json.loads(path.read_text())
    return data


class StubEngine:
    """An httpx.MockTransport handler serving a snapshot and a /metrics text that callers
    change between polls."""

    def __init__(self, snapshot: dict[str, Any] | bytes | None = None, metrics: str = "") -> None:
        self.snapshot = contract_example() if snapshot is None else snapshot
        self.metrics = metrics
        self.status = 200
        self.requests: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request.url.path)
        if self.status != 200:
            return httpx.Response(self.status, text="<html>error</html>")
        if request.url.path == "/debug/offload/snapshot":
            body = self.snapshot if isinstance(self.snapshot, bytes) else json.dumps(self.snapshot)
            return httpx.Response(200, content=body)
        if request.url.path == "/metrics":
            return httpx.Response(200, text=self.metrics)
        return httpx.Response(404)


def make_sidecar(engine: StubEngine, state_dir: Path, **overrides: Any) -> Any:
    """A fully assembled sidecar whose engine client talks to `engine` in memory."""
    from exporter.config import Config
    from exporter.sidecar import build

    config = Config(engine_url="http://engine.invalid", state_dir=state_dir, no_nvml=True,
                    **overrides)
    return build(config, transport=httpx.MockTransport(engine))
