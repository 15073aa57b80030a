"""What tests and benchmarks share: free ports, child processes on 127.0.0.1, waiting for them,
and reading an exposition back.

No pytest here: a benchmark reports a failure as a result ("not measured: why"), so waits raise
`WaitFailed`; tests/e2e/procs.py turns that into a test failure. Every process started through
`Procs` is stopped by `Procs.stop_all()` (SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import contextlib
import os
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
            PYTHON, "-m", "exporter", "simulate", "--listen", f"127.0.0.1:{port}",
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
