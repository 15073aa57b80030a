"""`helios-exporter status`: fetching /status, its errors in words, the text view, --watch."""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporter import options
from exporter.oncall import report
from lab.status import command as terminal
from lab.status import text
from tests.exporter.oncall import samples
from tests.exporter.oncall.samples import INCUMBENT, NOW, RESTORED
from tools.harness import ROOT, free_port

URL = "http://sidecar.test:19400/status"
DATE = "Mon, 30 Nov 2026 00:53:20 GMT"  # NOW


def args(**given: Any) -> argparse.Namespace:
    parser = options.parser(terminal.OPTIONS, environ={})
    argv = ["--sidecar", "sidecar.test:19400"]
    for key, value in given.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return parser.parse_args(argv)


def serving(status: dict[str, Any] | None = None, code: int = 200, body: bytes | None = None,
            seen: list[httpx.Request] | None = None) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        content = body if body is not None else json.dumps(status or samples.base()).encode()
        return httpx.Response(code, content=content, headers={"date": DATE})
    return httpx.MockTransport(handle)


@pytest.mark.parametrize(("given", "url"), [
    ("http://h:19400", "http://h:19400/status"), ("http://h:19400/", "http://h:19400/status"),
    ("h:19400", "http://h:19400/status"), ("https://h/status", "https://h/status"),
    ("https://h/prefix/", "https://h/prefix/status")])
def test_status_url(given: str, url: str) -> None:
    assert terminal.status_url(given) == url


def test_fetch_reads_status_and_the_sidecars_clock() -> None:
    with terminal.client(args(), serving()) as http:
        status, now = terminal.fetch(http, URL)
    assert status["generation"] == INCUMBENT["generation"]
    assert now == NOW


@pytest.mark.parametrize(("transport", "message"), [
    (serving(code=401), f"{URL} answered 401 Unauthorized: the sidecar requires basic auth: "
                        "give --user and --password-file"),
    (serving(code=503), f"{URL} answered 503 Service Unavailable"),
    (serving(body=b"<html>login</html>"), f"{URL} did not answer with a sidecar's /status JSON"),
    (serving(body=b"[1, 2]"), f"{URL} did not answer with a sidecar's /status JSON"),
])
def test_fetch_says_what_went_wrong(transport: httpx.MockTransport, message: str) -> None:
    with terminal.client(args(), transport) as http, pytest.raises(terminal.Unreachable) as exc:
        terminal.fetch(http, URL)
    assert str(exc.value).startswith(message)


def test_connection_refused_and_timeout_in_words() -> None:
    url = f"http://127.0.0.1:{free_port()}/status"
    with terminal.client(args()) as http, pytest.raises(terminal.Unreachable) as exc:
        terminal.fetch(http, url)
    assert str(exc.value) == f"cannot reach {url}: connection refused"

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with terminal.client(args(timeout=1.5), httpx.MockTransport(slow)) as http, \
            pytest.raises(terminal.Unreachable) as exc:
        terminal.fetch(http, URL)
    assert str(exc.value) == f"cannot reach {URL}: no answer within 1.5 s"


def test_basic_auth_from_the_password_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    seen: list[httpx.Request] = []
    with terminal.client(args(user="oncall", password_file=secret), serving(seen=seen)) as http:
        terminal.fetch(http, URL)
    assert seen[0].headers["authorization"] == httpx.BasicAuth("oncall", "s3cret")._auth_header
    with terminal.client(args(user="oncall", password_file=secret), serving(code=401)) as http, \
            pytest.raises(terminal.Unreachable, match="user or password rejected"):
        terminal.fetch(http, URL)


def test_bad_flag_combinations_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert terminal.run(args(user="oncall")) == 2
    assert "--user and --password-file go together" in capsys.readouterr().err
    assert terminal.run(args(ca_file=tmp_path / "missing.pem")) == 2
    assert "cannot use --ca-file" in capsys.readouterr().err


@pytest.mark.e2e
def test_unreachable_is_one_line_and_exit_1() -> None:
    port = free_port()
    proc = subprocess.run([sys.executable, "-m", "commands", "status", "--sidecar",
                           f"http://127.0.0.1:{port}"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == (f"helios-exporter status: cannot reach http://127.0.0.1:{port}/status: "
                           "connection refused\n")


# -- the text view ------------------------------------------------------------------------------
def test_text_is_plain_without_colour_and_coloured_words_with_it() -> None:
    rep = report.build(samples.wrong_container(), NOW)
    plain = text.render(rep, 100, color=False)
    assert "\x1b" not in plain
    assert "SUMMARY: FAILED" in plain
    assert (f"container          FAILED  {INCUMBENT['container_id']}  "
            f"{RESTORED['container_id']}") in plain
    coloured = text.render(rep, 100, color=True)
    assert "\x1b[1;31mFAILED\x1b[0m" in coloured and "\x1b[32mok\x1b[0m" in coloured


def test_a_table_too_wide_becomes_one_record_per_block() -> None:
    rep = report.build(samples.wrong_container(), NOW)
    narrow = text.render(rep, 80)
    assert ("\n    container id\n"
            f"      incumbent = reference = last verified  {INCUMBENT['container_id']}\n"
            f"      restored                               {RESTORED['container_id']} differs\n"
            ) in narrow
    assert max(len(line) for line in narrow.splitlines()
               if "sha256" not in line and "/" not in line) <= 80


def test_open_window_in_the_terminal() -> None:
    out = text.render(report.build(samples.open_window(180), NOW), 100)
    assert "request cutoff 2026-11-30 02:00:20 UTC, in 1 h 7 min 0 s" in out
    assert "restore deadline 2026-11-30 02:20:20 UTC, in 1 h 27 min 0 s" in out


def test_past_the_cutoff_with_nothing_in_flight_the_terminal_agrees_with_the_alert() -> None:
    out = text.render(report.build(samples.open_window(4200 + 185), NOW), 120)
    summary = out.split("WHAT TO DO NEXT")[0]
    assert "SUMMARY: WINDOW OPEN" in summary and "FAILED" not in summary
    assert "PASSED" not in out
    assert ("request cutoff 2026-11-30 00:50:15 UTC, passed 3 min 5 s ago; the incumbent has no "
            "request in flight") in out


def test_unplanned_restarts_and_an_aborted_outage_in_the_terminal() -> None:
    status = samples.base()
    status["restore"].update(unplanned_restarts=1, last_unplanned_restart=NOW - 60,
                             outage_aborted=True)
    out = text.render(report.build(status, NOW), 120)
    assert "SUMMARY: WARNING" in out
    assert ("restarted the engine came back as a new incarnation outside a restore window at "
            "2026-11-30 00:52:20 UTC (1 min 0 s ago)") in out
    assert re.search(r"unplanned restarts +1; the last at 2026-11-30 00:52:20 UTC", out)
    assert re.search(r"outage aborted +yes", out)
    assert "docs/runbooks/HeliosEngineRestartedOutsideWindow.md" in out


# -- --watch ------------------------------------------------------------------------------------
class Screen(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def stop_after(frames: int) -> Any:
    calls = []

    def sleep(_: float) -> None:
        calls.append(1)
        if len(calls) >= frames:
            raise KeyboardInterrupt
    return sleep


def test_watch_keeps_the_last_answer_under_the_error() -> None:
    answers = iter([samples.wrong_container(), None, None])

    def handle(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        if status is None:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return httpx.Response(200, json=status, headers={"date": DATE})

    out = Screen(tty=False)
    with terminal.client(args(), httpx.MockTransport(handle)) as http:
        assert terminal.watch(http, URL, 2, out, tty=False, color=False,
                              sleep=stop_after(3)) == 0
    frames = out.getvalue().split(f"every 2 s from {URL}; Ctrl-C to stop\n")[1:]
    assert len(frames) == 3
    assert "SUMMARY: FAILED" in frames[0] and "cannot reach" not in frames[0]
    for frame in frames[1:]:
        assert frame.startswith(f"cannot reach {URL}: connection refused (since ")
        assert "the last answer, from 2026-11-30 00:53:20 UTC:" in frame
        assert "SUMMARY: FAILED" in frame


def test_watch_on_a_terminal_redraws_from_the_top() -> None:
    out = Screen(tty=True)
    with terminal.client(args(), serving(samples.open_window())) as http:
        assert terminal.watch(http, URL, 1, out, tty=True, color=True, sleep=stop_after(2)) == 0
    shown = out.getvalue()
    assert shown.startswith("\x1b[?25l\x1b[2J\x1b[H")  # cursor hidden, cleared once
    assert shown.count("\x1b[H") == 2 and shown.count("\x1b[2J") == 1
    assert shown.endswith("\x1b[?25h\n")  # the cursor back after Ctrl-C


def test_fit_cuts_a_frame_to_the_screen() -> None:
    frame = "\n".join(f"line {i}" for i in range(50))
    cut = terminal.fit(frame, 80, 10).split("\n")
    assert len(cut) == 10 and cut[-1].startswith("... 41 more lines")
    wide = "x" * 200 + "\n" + "y"
    # 3 rows for the first line, 1 for the second, 1 left for the cursor
    assert terminal.fit(wide, 80, 5) == wide
    assert terminal.fit(wide, 80, 4).split("\n")[1].startswith("... 1 more lines")
