"""Real processes on 127.0.0.1 for end-to-end tests: the simulator, the sidecar, Prometheus,
Alertmanager. Every process started here is stopped by the fixture that started it."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tools.harness import ROOT, Proc, Procs, WaitFailed, free_port, http_ok, wait_until

__all__ = ["ROOT", "Proc", "Stack", "free_port", "http_ok", "need", "query", "stack", "wait_for"]


def need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.fail(f"{binary} not on PATH: scripts/bootstrap installs it")
    return path


def wait_for(check: Callable[[], Any], timeout: float, what: str, proc: Proc | None = None,
             interval: float = 0.2) -> Any:
    """tools.harness.wait_until, failing the test instead of raising."""
    try:
        return wait_until(check, timeout, what, proc, interval)
    except WaitFailed as exc:
        pytest.fail(str(exc))


class Stack(Procs):
    """The processes of one test: tools.harness.Procs plus Prometheus and Alertmanager."""

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
