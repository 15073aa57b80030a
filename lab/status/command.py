"""`helios-exporter status --sidecar URL [--watch]`: the on-call page in a terminal.

Reads the sidecar's `/status` and prints the same report as `GET /` (lab.status.text). With
`--watch` it redraws in place every `--interval` seconds until Ctrl-C; a sidecar that stops
answering is said at the top, above the last answer it gave, never as an empty screen. Without
`--watch`, an unreachable sidecar is one line on standard error and exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, Final, TextIO

import httpx

from exporter.defaults import STATUS_TIMEOUT, WATCH_INTERVAL
from exporter.oncall import report
from exporter.oncall.model import utc
from exporter.options import Option
from lab.client import access
from lab.status import text

ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Unreachable(Exception):
    """The sidecar gave no usable /status; the message says why, for a person."""


OPTIONS = (
    Option("--sidecar", "str", None, "the sidecar's base URL, e.g. http://127.0.0.1:19400",
           required=True, metavar="URL"),
    Option("--watch", "bool", False, "redraw in place every --interval seconds until Ctrl-C"),
    Option("--interval", "float", WATCH_INTERVAL, "seconds between redraws with --watch",
           above=0, metavar="S"),
    Option("--timeout", "float", STATUS_TIMEOUT, "seconds to wait for the sidecar", above=0,
           metavar="S"),
    *access.OPTIONS,
)


def status_url(sidecar: str) -> str:
    """The /status URL of a sidecar given as a base URL (a bare host:port means http)."""
    url = sidecar.strip()
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    return url if url.endswith("/status") else url + "/status"


def client(args: argparse.Namespace,
           transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """An HTTP client with the basic auth and TLS settings of the flags."""
    try:
        return access.client(args, timeout=args.timeout, user_agent="helios-exporter-status",
                             transport=transport, headers={"Accept": "application/json"})
    except access.AccessError as exc:
        raise Unreachable(str(exc)) from None


def fetch(http: httpx.Client, url: str) -> tuple[dict[str, Any], float]:
    """The sidecar's /status and the sidecar's clock when it answered (its Date header; this
    machine's clock when it sends none): ages on screen are the sidecar's, not this host's."""
    try:
        response = http.get(url)
    except httpx.TimeoutException:
        raise Unreachable(f"cannot reach {url}: no answer within {http.timeout.read:g} s") from None
    except httpx.HTTPError as exc:
        raise Unreachable(f"cannot reach {url}: {access.why(exc)}") from None
    if response.status_code == 401:
        raise Unreachable(f"{url} answered 401 Unauthorized: "
                          f"{access.basic_auth_refused(response)}")
    if response.status_code != 200:
        raise Unreachable(f"{url} answered {response.status_code} {response.reason_phrase}")
    data = access.json_object(response)
    if data is None:
        raise Unreachable(f"{url} did not answer with a sidecar's /status JSON "
                          "(is it a helios-exporter sidecar?)")
    now = time.time()
    if "date" in response.headers:
        with contextlib.suppress(TypeError, ValueError):
            now = parsedate_to_datetime(response.headers["date"]).timestamp()
    return data, now


def fit(frame: str, columns: int, rows: int) -> str:
    """The frame cut to what a terminal of this size shows without scrolling (a redraw in place
    only works when nothing scrolled), saying how much is left out."""
    lines = frame.rstrip("\n").split("\n")
    used, kept = 0, []
    for index, line in enumerate(lines):
        height = max(1, -(-len(ANSI.sub("", line)) // max(1, columns)))
        if used + height > rows - 1:
            kept.append(f"... {len(lines) - index} more lines: a taller terminal shows them, "
                        "or run without --watch"[: max(1, columns)])
            break
        kept.append(line)
        used += height
    return "\n".join(kept)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None,
        sleep: Callable[[float], None] = time.sleep) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    url = status_url(args.sidecar)
    tty = out.isatty()
    color = tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
    try:
        http = client(args)
    except Unreachable as exc:
        print(f"helios-exporter status: {exc}", file=err)
        return 2
    with http:
        try:
            if not args.watch:
                try:
                    status, now = fetch(http, url)
                except Unreachable as exc:
                    print(f"helios-exporter status: {exc}", file=err)
                    return 1
                width = shutil.get_terminal_size().columns if tty else 100
                out.write(text.render(report.build(status, now), width, color))
                return 0
            return watch(http, url, args.interval, out, tty, color, sleep)
        except BrokenPipeError:  # piped into head: not an error
            return 0


def watch(http: httpx.Client, url: str, interval: float, out: TextIO, tty: bool, color: bool,
          sleep: Callable[[float], None] = time.sleep) -> int:
    """Redraw until Ctrl-C (then 0): in place on a terminal, one frame after another otherwise."""
    last: tuple[str, float] | None = None  # the last good frame, and when it was the truth
    failing_since: float | None = None
    if tty:
        out.write("\x1b[?25l\x1b[2J")  # hide the cursor, clear once; then redraw from the top
    try:
        while True:
            size = shutil.get_terminal_size()
            width = size.columns if tty else 100
            head = f"every {interval:g} s from {url}; Ctrl-C to stop"
            try:
                status, now = fetch(http, url)
                last = (text.render(report.build(status, now), width, color), now)
                failing_since = None
                frame = f"{head}\n\n{last[0]}"
            except Unreachable as exc:
                failing_since = failing_since or time.time()
                problem = f"{exc} (since {utc(failing_since)}, retrying)"
                problem = text.sgr(problem, "bad", color)
                below = ("nothing shown yet: no answer since this started" if last is None else
                         f"the last answer, from {utc(last[1])}:\n\n{last[0]}")
                frame = f"{head}\n{problem}\n{below}"
            if tty:
                frame = fit(frame, size.columns, size.lines)
                out.write("\x1b[H" + frame.replace("\n", "\x1b[K\n") + "\x1b[K\x1b[J")
            else:
                out.write(frame.rstrip("\n") + "\n\n")
            out.flush()
            sleep(interval)
    except KeyboardInterrupt:
        return 0
    finally:
        if tty:
            out.write("\x1b[?25h\n")  # the cursor back, below the last frame
            out.flush()
