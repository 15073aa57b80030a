"""The demo end to end with real Prometheus (the shipped rules) and Alertmanager on free ports, on
a compressed timeline: the status page URL first, the offload story, the restore window, each
alert as it fires and as it resolves; then a re-run at once keeps every port."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx
import pytest

from tests.e2e.procs import need
from tests.lab.demo.demo_proc import DemoRun
from tools.harness import free_port

pytestmark = pytest.mark.e2e


def test_the_demo_narrates_alerts_firing_and_resolving_then_keeps_its_ports(
        tmp_path: Path) -> None:
    need("prometheus")
    if shutil.which("prometheus-alertmanager") is None:
        need("alertmanager")
    ports = {"--engine-port": free_port(), "--port": free_port(),
             "--prometheus-port": free_port(), "--alertmanager-port": free_port()}
    flags = [str(x) for kv in ports.items() for x in kv]
    # Drain at 20 s (Prometheus watches from about 10 s), restored at 26 s; --duration counts from
    # the narration's start (after Prometheus's first scrape).
    run = DemoRun(tmp_path / "first", *flags, "--duration", "32", "--outage-after", "20",
                  "--drain-seconds", "2", "--closed-seconds", "1", "--down-seconds", "3",
                  "--request-cutoff", "10", "--restore-bound", "30")
    # Keep-alive connections to every server, as a browser tab holds them: when the servers
    # stop they close first, and their ports wait in TIME_WAIT.
    browser = httpx.Client(timeout=5.0)
    try:
        run.wait_for("Ctrl-C stops everything")
        shown = run.ports()
        urls = {"simulated engine": "/health", "sidecar": "/metrics",
                "prometheus alerts": "/-/ready", "alertmanager": "/-/ready"}
        for name, path in urls.items():
            assert browser.get(f"http://127.0.0.1:{shown[name]}{path}").status_code == 200
        assert run.proc.wait(timeout=120) == 0, run.output()
    finally:
        browser.close()
        run.stop()
    out = run.output()
    header = [line for line in out.splitlines() if "http://127.0.0.1:" in line]
    assert header[0].split() == ["status", "page", f"http://127.0.0.1:{ports['--port']}/",
                                 "the", "restore", "window", "at", "a", "glance"]
    assert shown == {"status page": ports["--port"], "sidecar": ports["--port"],
                     "prometheus alerts": ports["--prometheus-port"],
                     "alertmanager": ports["--alertmanager-port"],
                     "simulated engine": ports["--engine-port"]}
    assert "pass 1, the prime (forward): 0 of 52 lookups hit (misses: no_prefix 52)" in out
    assert re.search(r"row evictions 112 \(112 while >= 25% of pages were free\), page "
                     r"evictions 0; free now: rows 0/512 \(0%\), pages \d+/24576", out)
    assert "window opened (cause drain)" in out and "window closed in_time" in out
    for name in ("HeliosRestoreWindowOpen", "HeliosRestoreBoundAtRisk"):
        fired = re.search(rf"^\[\+ *([\d.]+)s\] alert    FIRING    {name} \(\w+.*\): \S", out,
                          re.MULTILINE)
        resolved = re.search(rf"^\[\+ *([\d.]+)s\] alert    resolved  {name} .* after \d+s$", out,
                             re.MULTILINE)
        assert fired and resolved, out
        assert float(fired.group(1)) < float(resolved.group(1))
        assert out.count(f"FIRING    {name}") == 1  # once, not once per evaluation
    assert run.leftovers() == []

    # At once, the same ports: their TIME_WAIT does not make them look busy.
    again = DemoRun(tmp_path / "again", *flags, "--duration", "1", "--scenario", "idle")
    try:
        assert again.proc.wait(timeout=120) == 0, again.output()
    finally:
        again.stop()
    assert again.ports() == shown, again.output()
