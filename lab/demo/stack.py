"""The demo's processes: ports, a temporary folder for their configs, logs and state, and starting
and stopping them in order. Every child runs in its own process group (Ctrl-C in the terminal
reaches only the demo, which then stops them in order) and is told to exit if the demo dies."""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

LOG_TAIL_LINES = 15


def free_port(preferred: int, host: str = "127.0.0.1") -> int:
    """`preferred` unless something listens on it, else a port the kernel picks.

    The probe binds with SO_REUSEADDR, as the servers started on it do: a port whose earlier
    connections still wait in TIME_WAIT (a demo stopped a minute ago) is free to them, so the demo
    keeps its ports across re-runs.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, preferred))
            return preferred
        except OSError:
            pass
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class StartFailed(Exception):
    """A child did not come up: its name, why, and the end of its log."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: SIGTERM this child when the demo dies, even by SIGKILL (no orphans holding ports)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


class Stack:
    """The children of one demo run and the folder they write to (removed by `close` unless kept)."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="helios-demo-"))
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def log(self, name: str) -> Path:
        return self.tmp / f"{name}.log"

    def start(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        with self.log(name).open("wb") as log:
            # preexec_fn is unsafe with threads; the demo's process starts none.
            die_with_parent = _die_with_parent if sys.platform == "linux" else None
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                process_group=0, preexec_fn=die_with_parent,  # noqa: PLW1509
            )
        self.procs.append((name, proc))
        return proc

    def tail(self, name: str) -> str:
        try:
            lines = self.log(name).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join("    " + line for line in lines[-LOG_TAIL_LINES:])

    def wait_ready(self, name: str, url: str, timeout: float = 60.0,
                   ready: Callable[[httpx.Response], bool] = lambda r: r.status_code == 200) -> None:
        """Until `url` answers as `ready` says; StartFailed at once if the child exits."""
        proc = dict(self.procs)[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StartFailed(f"{name} exited with code {proc.returncode} before it was ready; "
                                  f"the end of {self.log(name)}:\n{self.tail(name)}")
            with contextlib.suppress(httpx.HTTPError):
                if ready(httpx.get(url, timeout=1.0)):
                    return
            time.sleep(0.1)
        raise StartFailed(f"{name} did not answer {url} within {timeout:.0f}s; "
                          f"the end of {self.log(name)}:\n{self.tail(name)}")

    def exited(self) -> str | None:
        """Why the demo cannot go on (a child exited), or None."""
        for name, proc in self.procs:
            if proc.poll() is not None:
                return (f"{name} exited with code {proc.returncode}; the end of "
                        f"{self.log(name)}:\n{self.tail(name)}")
        return None

    def stop(self) -> None:
        """Stop the children, the last started first (Prometheus before the sidecar it scrapes)."""
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for _, proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self, *, keep: bool) -> bool:
        """Stop everything; remove the folder unless `keep`. Whether it was kept."""
        self.stop()
        if keep:
            return True
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False
