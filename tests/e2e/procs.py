"""Real processes on 127.0.0.1 for end-to-end tests: the simulator, the sidecar, Prometheus,
Alertmanager. Every process started here is stopped by the fixture that started it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.fail(f"{binary} not on PATH: scripts/bootstrap installs it")
    return path


@dataclass
class Proc:
    name: str
    args: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> Proc:
        out = self.log.open("ab")
        self.popen = subprocess.Popen(
            self.args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        out.close()
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        if self.popen is None or self.popen.poll() is not None:
            return None if self.popen is None else self.popen.returncode
        self.popen.send_signal(sig)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


def wait_for(check: Callable[[], Any], timeout: float, what: str, proc: Proc | None = None,
             interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, KeyError, IndexError, ValueError):
            last = check()
            if last:
                return last
        if proc is not None and proc.popen is not None and proc.popen.poll() is not None:
            pytest.fail(f"{proc.name} exited while waiting for {what}:\n{proc.tail()}")
        time.sleep(interval)
    extra = f"\n{proc.name} log:\n{proc.tail()}" if proc else ""
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last!r}){extra}")


def http_ok(url: str) -> bool:
    return httpx.get(url, timeout=2.0).status_code == 200


class Stack:
    """Starts and stops the processes of one test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Proc:
        proc = Proc(name, args, self.tmp / f"{name}.log", env=env or {}).start()
        self.procs.append(proc)
        return proc

    def simulator(self, scenario: str, *extra: str, port: int | None = None,
                  wait: bool = True) -> tuple[Proc, str]:
        port = port or free_port()
        proc = self.start(f"engine-{port}", [sys.executable, "-m", "exporter", "simulate",
                                             "--listen", f"127.0.0.1:{port}", "--scenario",
                                             scenario, *extra])
        url = f"http://127.0.0.1:{port}"
        if wait:
            wait_for(lambda: http_ok(url + "/health"), 30, "simulated engine", proc)
        return proc, url

    def sidecar(self, engine_url: str, *extra: str, port: int | None = None,
                state_dir: Path | None = None, name: str = "sidecar",
                wait: bool = True) -> tuple[Proc, str]:
        port = port or free_port()
        state_dir = state_dir or self.tmp / "state"
        proc = self.start(name, [sys.executable, "-m", "exporter", "serve", "--engine-url",
                                 engine_url, "--listen", f"127.0.0.1:{port}", "--state-dir",
                                 str(state_dir), "--no-nvml", "--log-format", "json", *extra])
        url = f"http://127.0.0.1:{port}"
        if wait:
            wait_for(lambda: http_ok(url + "/readyz"), 30, "sidecar ready", proc)
        return proc, url

    def prometheus(self, targets: list[str], rule_files: list[Path] = (),  # type: ignore[assignment]
                   alertmanager: str | None = None, interval: str = "1s") -> tuple[Proc, str]:
        port = free_port()
        config = self.tmp / f"prometheus-{port}.yml"
        lines = [f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"]
        if alertmanager:
            lines.append("alerting:\n  alertmanagers:\n    - static_configs:\n"
                         f"        - targets: ['{alertmanager}']\n")
        if rule_files:
            lines.append("rule_files:\n" + "".join(f"  - {r}\n" for r in rule_files))
        lines.append("scrape_configs:\n  - job_name: helios-exporter\n    static_configs:\n"
                     f"      - targets: {targets!r}\n")
        config.write_text("".join(lines))
        proc = self.start("prometheus", [
            need("prometheus"), f"--config.file={config}",
            f"--storage.tsdb.path={self.tmp / f'prom-{port}'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ])
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: http_ok(url + "/-/ready"), 60, "prometheus ready", proc)
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
        wait_for(lambda: http_ok(url + "/-/ready"), 60, "alertmanager ready", proc)
        return proc, url

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


def query(prom: str, expr: str) -> list[dict[str, Any]]:
    resp = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=5.0)
    resp.raise_for_status()
    result: list[dict[str, Any]] = resp.json()["data"]["result"]
    return result
