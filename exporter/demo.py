"""`helios-exporter demo`: the simulated engine, the sidecar and, when installed, Prometheus and
Alertmanager with the shipped rules, all on 127.0.0.1 as child processes. Ctrl-C stops them all.

The default plays the `outage` scenario with compressed bounds so the whole restore story (drain,
drained, container down, restored with a fresh generation, checks) fits in a few minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", default="outage",
                        help="simulator scenario: steady, reverse-replay or outage (default)")
    parser.add_argument("--engine-port", type=int, default=8000)
    parser.add_argument("--port", type=int, default=19400, help="sidecar port")
    parser.add_argument("--prometheus-port", type=int, default=9090)
    parser.add_argument("--alertmanager-port", type=int, default=9093)
    parser.add_argument("--poll-interval", default="1")
    parser.add_argument("--request-cutoff", default="20")
    parser.add_argument("--restore-bound", default="45")
    parser.add_argument("--down-grace", default="3")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="stop after this many seconds (0: run until Ctrl-C)")
    parser.add_argument("--no-prometheus", action="store_true",
                        help="do not start Prometheus and Alertmanager even when installed")


def free_port(preferred: int) -> int:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1.0).status_code < 500:
                return True
        time.sleep(0.2)
    return False


def prometheus_config(sidecar: str, am_port: int | None, rules: list[Path]) -> str:
    alerting = ""
    if am_port is not None:
        alerting = (f"alerting:\n  alertmanagers:\n    - static_configs:\n"
                    f"        - targets: ['127.0.0.1:{am_port}']\n")
    rule_lines = "".join(f"  - {r}\n" for r in rules)
    return (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        + alerting
        + (f"rule_files:\n{rule_lines}" if rules else "")
        + "scrape_configs:\n  - job_name: helios-exporter\n    static_configs:\n"
        f"      - targets: ['{sidecar}']\n"
    )


ALERTMANAGER_CONFIG = """route:
  receiver: log
  group_wait: 1s
  group_interval: 5s
  repeat_interval: 1h
receivers:
  - name: log
"""


def run(args: argparse.Namespace) -> int:
    exe = [sys.executable, "-m", "exporter"]
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    tmp = Path(tempfile.mkdtemp(prefix="helios-demo-"))
    engine_port = free_port(args.engine_port)
    port = free_port(args.port)
    engine = f"http://127.0.0.1:{engine_port}"
    sidecar = f"127.0.0.1:{port}"

    def start(name: str, cmd: list[str]) -> None:
        log = (tmp / f"{name}.log").open("wb")
        procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)))

    try:
        start("engine", [*exe, "simulate", "--listen", f"127.0.0.1:{engine_port}",
                         "--scenario", args.scenario])
        if not wait_http(engine + "/health"):
            print(f"demo: the simulated engine did not start; see {tmp}/engine.log", file=sys.stderr)
            return 1
        token = tmp / "events.token"
        token.write_text("demo-token\n")
        start("sidecar", [*exe, "serve", "--engine-url", engine, "--listen", sidecar,
                          "--poll-interval", args.poll_interval, "--state-dir", str(tmp / "state"),
                          "--request-cutoff", args.request_cutoff,
                          "--restore-bound", args.restore_bound, "--down-grace", args.down_grace,
                          "--events-token-file", str(token), "--no-nvml", "--log-format", "json"])
        if not wait_http(f"http://{sidecar}/readyz"):
            print(f"demo: the sidecar did not start; see {tmp}/sidecar.log", file=sys.stderr)
            return 1
        lines = [f"simulated engine   {engine}  (scenario {args.scenario})",
                 f"sidecar /metrics   http://{sidecar}/metrics",
                 f"sidecar /status    http://{sidecar}/status",
                 f"events token       {token}"]
        prom = shutil.which("prometheus")
        am = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        if prom and not args.no_prometheus:
            am_port = None
            if am:
                am_port = free_port(args.alertmanager_port)
                (tmp / "alertmanager.yml").write_text(ALERTMANAGER_CONFIG)
                start("alertmanager", [am, f"--config.file={tmp}/alertmanager.yml",
                                       f"--storage.path={tmp}/am-data",
                                       f"--web.listen-address=127.0.0.1:{am_port}",
                                       "--cluster.listen-address="])
                lines.append(f"alertmanager       http://127.0.0.1:{am_port}")
            rules = sorted((REPO / "alerts").glob("helios-*.yaml"))
            prom_port = free_port(args.prometheus_port)
            (tmp / "prometheus.yml").write_text(prometheus_config(sidecar, am_port, rules))
            start("prometheus", [prom, f"--config.file={tmp}/prometheus.yml",
                                 f"--storage.tsdb.path={tmp}/prom-data",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"])
            lines.append(f"prometheus         http://127.0.0.1:{prom_port}  "
                         f"({len(rules)} rule files)")
        else:
            lines.append("prometheus         not started (install Debian's prometheus, or run "
                         "scripts/bootstrap)")
        lines.append(f"logs               {tmp}")
        print("helios-exporter demo is up:\n  " + "\n  ".join(lines), flush=True)
        print("Ctrl-C stops everything.", flush=True)
        stop_at = time.monotonic() + args.duration if args.duration > 0 else None
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
        narrator = Narrator(f"http://{sidecar}/status")
        with contextlib.suppress(KeyboardInterrupt):
            while stop_at is None or time.monotonic() < stop_at:
                for name, proc in procs:
                    if proc.poll() is not None:
                        print(f"demo: {name} exited ({proc.returncode}); see {tmp}/{name}.log",
                              file=sys.stderr)
                        return 1
                narrator.tick()
                time.sleep(0.5)
        return 0
    finally:
        for _, proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        for _, proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Narrator:
    """Prints the restore story as the sidecar's /status tells it: one line per change."""

    def __init__(self, status_url: str) -> None:
        self.url = status_url
        self.t0 = time.monotonic()
        self.last: tuple[object, ...] | None = None

    def tick(self) -> None:
        try:
            status = httpx.get(self.url, timeout=1.0).json()
        except (httpx.HTTPError, ValueError):
            return
        restore = status["restore"]
        window = restore["window"]
        key = (restore["phase"], status["generation"], bool(window),
               json_key(restore["last_window"]))
        if key == self.last:
            return
        self.last = key
        stamp = f"[+{time.monotonic() - self.t0:5.1f}s]"
        line = f"{stamp} phase {restore['phase']:<10} generation {status['generation']}"
        if window:
            line += (f"  window ({window['cause']}): request cutoff in "
                     f"{window['seconds_to_request_cutoff']:.0f}s, restore deadline in "
                     f"{window['seconds_to_restore_deadline']:.0f}s, incumbent in-flight "
                     f"{window['incumbent_inflight_requests']}")
        elif restore["last_window"]:
            last = restore["last_window"]
            checks = ", ".join(f"{k} {'ok' if v else 'FAILED'}"
                               for k, v in sorted(restore["checks"].items()))
            took = last["duration_seconds"]  # None: a restore nobody watched
            line += (f"  last window {last['outcome']}"
                     + (f" after {took:.1f}s" if took is not None else "")
                     + f"; checks: {checks or 'none'}")
        print(line, flush=True)


def json_key(value: object) -> str:
    return repr(value)
