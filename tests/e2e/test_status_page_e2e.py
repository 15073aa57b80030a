"""The on-call page in a real headless Chromium and the terminal view under tmux, against a real
simulated engine and sidecar on 127.0.0.1: during a restore window, after a restore into the
wrong container, and with the sidecar gone."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
from pathlib import Path

from exporter.oncall.model import utc
from tests.e2e.procs import ROOT, Stack, wait_for
from tests.exporter.web.tlsproc import tls_sidecar
from tests.helpers import missing
from tools import chromium as chromium_tool
from tools import status_page as story
from tools.chromium import chromium
from tools.pki import CA, write_web_config


def _left(text: str, label: str) -> str:
    """The time left after `label <UTC time>,` in the page's text."""
    match = re.search(rf"{label} \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC, (in [^\n\t]*?s)\b", text)
    assert match, f"no time left after {label!r} in:\n{text[:2000]}"
    return match.group(1)


def test_page_in_chromium_during_a_window_and_after_the_wrong_container(
        stack: Stack, tmp_path: Path) -> None:
    if chromium_tool.binary() is None:
        missing("chromium not on PATH")
    engine, sidecar, _ = story.start(stack)
    window = story.open_window(engine, sidecar)
    cutoff, restore = utc(window["request_cutoff_deadline"]), utc(window["restore_deadline"])
    page = sidecar + "/"
    with chromium() as browser:
        for name, viewport in (("desktop", story.DESKTOP), ("phone", story.PHONE)):
            shown = story.shoot(browser, page, tmp_path / f"window-open-{name}.png", **viewport)
            assert "Summary: WINDOW OPEN" in shown
            assert f"request cutoff {cutoff}, in 1 h 9 min" in shown, name
            assert f"restore deadline {restore}, in 1 h 29 min" in shown, name
            # The pins the sidecar was started with, expected against found.
            assert re.search(r"\nranks\s+ok\s+2\s+2\n", shown), shown
            # One column: nothing wider than the screen, on the phone too.
            assert browser.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        # The countdown runs (the script is allowed by the page's CSP) ...
        before = _left(browser.text(), "request cutoff")
        wait_for(lambda: _left(browser.text(), "request cutoff") != before, 5, "a tick")
        # ... and everything is there without it.
        browser.open(page, scripts=False)
        off = browser.text()
        assert f"request cutoff {cutoff}, in 1 h 9 min" in off
        assert f"restore deadline {restore}, in 1 h 29 min" in off

        after = story.restore_into_new_container(engine, sidecar)
        shown = story.shoot(browser, page, tmp_path / "wrong-container-desktop.png",
                            **story.DESKTOP)
        assert "Summary: FAILED" in shown
        assert re.search(r"FAILED post-restore check container", shown)
        row = re.search(r"\ncontainer\tFAILED\t([^\t\n]*)\t([^\t\n]*)\n", shown)
        assert row, shown
        # Both container ids: the one before the restore, and the new one the engine runs in.
        reason = next(r for r in after["restore"]["failed_checks"] if r["check"] == "container")
        before_id = after["restore"]["last_window"]["incumbent"]["container_id"]
        assert row.groups() == (before_id, after["identity"]["container_id"])
        assert reason["expected"] == before_id and before_id != after["identity"]["container_id"]
        assert re.search(rf"\ncontainer id\s+{before_id}\s+"
                         rf"{after['identity']['container_id']}\s+differs\n", shown), shown
        assert "docs/runbooks/HeliosRestoreCheckFailed.md" in shown

    # The page asked the sidecar for itself and for nothing else, and broke no rule of its CSP.
    assert browser.requests and set(browser.requests) == {page}
    assert browser.console == []


def _tmux(sock: Path, *args: str) -> str:
    tmux = shutil.which("tmux")
    assert tmux
    return subprocess.run([tmux, "-S", str(sock), *args], capture_output=True, text=True,
                          check=True, timeout=30).stdout


def test_terminal_view_under_tmux(stack: Stack, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        missing("tmux not on PATH")
    engine, sidecar, sidecar_proc = story.start(stack)
    window = story.open_window(engine, sidecar)
    sock, rc = tmp_path / "tmux.sock", tmp_path / "rc"
    # The pane stays after the command (sleep) so that the screen can be read after Ctrl-C;
    # kill-server below ends it.
    command = (f"{sys.executable} -m commands status --sidecar {sidecar} --watch --interval 0.5;"
               f" echo $? > {rc}; sleep 60")
    _tmux(sock, "new-session", "-d", "-x", "110", "-y", "60", "-c", str(ROOT), command)
    try:
        def screen() -> str:
            return _tmux(sock, "capture-pane", "-p")

        def history() -> str:  # the screen and everything scrolled off it
            return _tmux(sock, "capture-pane", "-p", "-S", "-")

        first = wait_for(lambda: "SUMMARY" in (s := screen()) and s, 30, "the first frame")
        assert first.startswith(f"every 0.5 s from {sidecar}/status; Ctrl-C to stop")
        assert f"request cutoff {utc(window['request_cutoff_deadline'])}, in 1 h 9 min" in first
        assert "RESTORE WINDOW OPEN phase" in first
        assert "\x1b[" in _tmux(sock, "capture-pane", "-p", "-e")  # colour on a terminal
        left = _left(first, "request cutoff")
        wait_for(lambda: _left(screen(), "request cutoff") != left, 10, "a redraw")
        # Redrawn in place: one frame on the screen, none scrolled away.
        assert history().count("Helios restore status") == 1

        sidecar_proc.stop()
        gone = wait_for(lambda: "cannot reach" in (s := screen()) and s, 15, "the error")
        assert (f"cannot reach {sidecar}/status: connection refused (since " in gone)
        assert "the last answer, from" in gone and "RESTORE WINDOW OPEN" in gone
        assert history().count("Helios restore status") == 1

        _tmux(sock, "send-keys", "C-c")
        assert wait_for(lambda: rc.read_text().strip() if rc.exists() else "", 15,
                        "the exit status") == "0"
        after = history()
        assert "Traceback" not in after and after.count("Helios restore status") == 1
    finally:
        subprocess.run([shutil.which("tmux") or "tmux", "-S", str(sock), "kill-server"],
                       capture_output=True, check=False, timeout=30)


def test_terminal_view_of_a_sidecar_whose_certificate_expires_soon(stack: Stack,
                                                                   tmp_path: Path) -> None:
    """`helios-exporter status` under tmux, over TLS with basic auth, against a real sidecar
    serving a certificate that expires in two days: the summary and the Sidecar section say so,
    with the time left, and what to do next names the page's runbook."""
    if shutil.which("tmux") is None:
        missing("tmux not on PATH")
    ca = CA(tmp_path / "pki")
    server = ca.issue("sidecar-soon", server=True, valid_for=dt.timedelta(days=2))
    web = write_web_config(tmp_path / "web.yml", server=server, users={"prometheus": "pw-0123"})
    _, url = tls_sidecar(stack, web, ca.path)
    password = tmp_path / "pw"
    password.write_text("pw-0123")
    sock = tmp_path / "tmux.sock"
    command = (f"{sys.executable} -m commands status --sidecar {url} --ca-file {ca.path} "
               f"--user prometheus --password-file {password}; sleep 60")
    _tmux(sock, "new-session", "-d", "-x", "120", "-y", "200", "-c", str(ROOT), command)
    try:
        def history() -> str:
            return _tmux(sock, "capture-pane", "-p", "-S", "-")

        shown = wait_for(lambda: "SIDECAR" in (s := history()) and s, 30, "the status")
    finally:
        subprocess.run([shutil.which("tmux") or "tmux", "-S", str(sock), "kill-server"],
                       capture_output=True, check=False, timeout=30)
    flat = re.sub(r"\s+", " ", shown)
    assert "expires soon the server certificate of the web configuration: " in flat
    assert re.search(r"server certificate expires soon \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, "
                     r"in 1 d 23 h", flat), flat
    assert "(CN=sidecar-soon from tls_server_config.cert_file" in flat
    assert "docs/runbooks/HeliosExporterCertificateExpiryImminent.md" in flat
    assert "collectors ok all 11 render" in flat  # --no-nvml: no gpu collector
