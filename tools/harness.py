"""What tests and benchmarks share: free ports, child processes on 127.0.0.1 (the simulator, the
sidecar, Prometheus, Alertmanager), waiting for them, reading an exposition back, and a stub
engine (in memory for an in-process sidecar, or served on 127.0.0.1). Every test and benchmark
starts its sidecars and stub engines here.

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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    err: Path | None = None  # stderr apart from stdout (None: both in `log`)

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self) -> Proc:
        with contextlib.ExitStack() as files:
            out = files.enter_context(self.log.open("ab"))
            err = subprocess.STDOUT if self.err is None else files.enter_context(self.err.open("ab"))
            self.popen = subprocess.Popen(
                self.args, stdout=out, stderr=err, cwd=ROOT,
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
        """The last `lines` of its output (stdout, then stderr when that is apart)."""
        text = []
        for path in filter(None, (self.log, self.err)):
            with contextlib.suppress(OSError):
                text += path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


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
                env: dict[str, str] | None = None, wait: bool = True,
                nvml: bool = False) -> tuple[Proc, str]:
        """`start_sidecar` in this section's folder, stopped by `stop_all`."""
        proc, url = start_sidecar(engine_url, self.workdir / f"{name}.log", *extra, port=port,
                                  state_dir=state_dir or self.workdir / f"{name}-state",
                                  name=name, env=env, nvml=nvml,
                                  ready=self.ready_timeout if wait else None)
        self.procs.append(proc)
        return proc, url

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                proc.stop()


def serve_args(engine_url: str, port: int, state_dir: Path, *extra: str,
               nvml: bool = False) -> list[str]:
    """`helios-exporter serve` polling `engine_url`, listening on 127.0.0.1:`port`, without
    NVML unless asked, logging JSON; `extra` last (where it repeats an option, it wins)."""
    return [PYTHON, "-m", "exporter", "serve", "--engine-url", engine_url,
            "--listen", f"127.0.0.1:{port}", "--state-dir", str(state_dir),
            *(() if nvml else ("--no-nvml",)), "--log-format", "json", *extra]


def start_sidecar(engine_url: str, log: Path, *extra: str, state_dir: Path,
                  port: int | None = None, name: str = "sidecar",
                  env: dict[str, str] | None = None, err: Path | None = None,
                  ready: float | None = 60.0, nvml: bool = False) -> tuple[Proc, str]:
    """The one way tests and benchmarks start a sidecar (`serve_args`), writing `log` (and
    stderr to `err` when given); waits up to `ready` seconds for /readyz (None: not at all).
    Returns the process and its base URL; the caller stops it (`Procs.sidecar` does)."""
    port = port or free_port()
    proc = Proc(name, serve_args(engine_url, port, state_dir, *extra, nvml=nvml), log, env or {},
                err=err).start()
    url = f"http://127.0.0.1:{port}"
    if ready is not None:
        try:
            wait_http(url + "/readyz", ready, proc)
        except BaseException:
            proc.stop()
            raise
    return proc, url


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


# -- a stub engine ----------------------------------------------------------------------------
def contract_example(version: int = 1) -> dict[str, Any]:
    """The contract example snapshot of schema `version` (1 or 3)."""
    path = CONTRACT_EXAMPLE_V3 if version == 3 else CONTRACT_EXAMPLE
    data: dict[str, Any] = json.loads(path.read_text())
    return data


class StubEngine:
    """An engine that callers change between polls: `snapshot` (a dict, or the body's bytes) at
    /debug/offload/snapshot, `metrics` at /metrics (Prometheus text, so it serves a scrape
    target too), "ok" at /health, 404 elsewhere; the paths asked, in order, in `requests`.
    Faults: `status` other than 200 answers every path with it and an error page; `down`
    refuses (in memory a connection error; served, 503 with no body, as Prometheus sees an
    unreachable target). Byte-level faults (stalls, drips, bad framing) are tests/hostile/stub.py's.

    Called, it is an httpx.MockTransport handler for a sidecar in this process (`make_sidecar`);
    `serve()` puts the same answers on 127.0.0.1 for a sidecar process or a Prometheus."""

    def __init__(self, snapshot: dict[str, Any] | bytes | None = None, metrics: str = "") -> None:
        self.snapshot = contract_example() if snapshot is None else snapshot
        self.metrics = metrics
        self.status = 200
        self.down = False
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    def answer(self, path: str) -> httpx.Response | None:
        """The answer at `path`; None while `down`."""
        self.requests.append(path)
        if self.down:
            return None
        if self.status != 200:
            return httpx.Response(self.status, text="<html>error</html>")
        if path == "/debug/offload/snapshot":
            body = self.snapshot if isinstance(self.snapshot, bytes) else json.dumps(self.snapshot)
            return httpx.Response(200, content=body)
        if path == "/metrics":
            return httpx.Response(200, text=self.metrics,
                                  headers={"Content-Type": "text/plain; version=0.0.4"})
        if path == "/health":
            return httpx.Response(200, text="ok")
        return httpx.Response(404)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        answer = self.answer(request.url.path)
        if answer is None:
            raise httpx.ConnectError("connection refused", request=request)
        return answer

    @property
    def url(self) -> str:  # served: the base URL
        return f"http://{self.target}"

    @property
    def target(self) -> str:  # served: host:port (a scrape target)
        assert self._server is not None, "not served"
        return f"127.0.0.1:{self._server.server_address[1]}"

    def serve(self) -> StubEngine:
        """Start answering on a free port of 127.0.0.1 (threads of this process); `close()`
        stops (a `with` block does both)."""
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer = engine.answer(self.path.split("?", 1)[0])
                body = b"" if answer is None else answer.content
                self.send_response(503 if answer is None else answer.status_code)
                if answer is not None and "content-type" in answer.headers:
                    self.send_header("Content-Type", answer.headers["content-type"])
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> StubEngine:
        return self if self._server is not None else self.serve()

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_sidecar(engine: StubEngine, state_dir: Path, **overrides: Any) -> Any:
    """A fully assembled sidecar whose engine client talks to `engine` in memory."""
    from exporter.config import Config
    from exporter.sidecar import build

    config = Config(engine_url="http://engine.invalid", state_dir=state_dir, no_nvml=True,
                    **overrides)
    return build(config, transport=httpx.MockTransport(engine))
