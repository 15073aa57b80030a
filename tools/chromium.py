"""A headless Chromium driven over the DevTools protocol on a pipe, for tests and screenshots.

`--remote-debugging-pipe` makes Chromium read protocol commands from fd 3 and write answers and
events to fd 4, NUL-separated JSON: no WebDriver, no websocket library, no browser download
(Debian's `chromium`, which scripts/bootstrap installs). Every request a page makes is recorded
from the Network domain, and console messages (CSP violations among them) from the Log domain.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars")


class ChromiumError(RuntimeError):
    pass


def binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Chromium:
    proc: subprocess.Popen[bytes]
    to_browser: int  # our end of its fd 3
    from_browser: int  # our end of its fd 4
    session: str = ""
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    console: list[str] = field(default_factory=list)  # console and browser log entries
    _next: int = 0
    _buffer: bytes = b""

    # -- protocol ---------------------------------------------------------------------------
    def _send(self, method: str, params: dict[str, Any] | None = None,
              session: str | None = None) -> int:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self._next

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise ChromiumError("no answer from chromium in time")
            import select

            ready, _, _ = select.select([self.from_browser], [], [], 0.2)
            if ready:
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise ChromiumError(f"chromium exited ({self.proc.poll()})")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        self._event(message)
        return message

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.console.append(f"{entry.get('level')}: {entry.get('text')}")
        elif method == "Runtime.consoleAPICalled":
            self.console.append(f"{params.get('type')}: {params.get('args')}")

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0,
             browser: bool = False) -> dict[str, Any]:
        """Send one command (to the page unless `browser`) and return its result."""
        wanted = self._send(method, params, None if browser else self.session)
        while True:
            message = self._read(timeout)
            if message.get("id") == wanted:
                if "error" in message:
                    raise ChromiumError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def wait_event(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        while True:
            message = self._read(timeout)
            if message.get("method") == method:
                params: dict[str, Any] = message.get("params", {})
                return params

    # -- what tests do ----------------------------------------------------------------------
    def open(self, url: str, width: int = 1200, height: int = 900, mobile: bool = False,
             scripts: bool = True) -> None:
        """Load `url` in a viewport of this size, with or without scripts, and wait for load."""
        self.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
        self.call("Emulation.setScriptExecutionDisabled", {"value": not scripts})
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self) -> str:
        """The page as a person reads it (rendered text, hidden parts left out)."""
        return str(self.evaluate("document.body.innerText"))

    def html(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def screenshot(self, path: Path, full: bool = True) -> None:
        """A PNG of the whole page (as tall as its content), or of what the screen shows."""
        metrics = self.call("Page.getLayoutMetrics")
        size = metrics["cssContentSize"] if full else metrics["cssLayoutViewport"]
        width = size["width"] if full else size["clientWidth"]
        height = size["height"] if full else size["clientHeight"]
        shot = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": full,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
        path.write_bytes(base64.b64decode(shot["data"]))


def _high(fd: int) -> int:
    """The same pipe end on a descriptor above 4, so that moving ends onto 3 and 4 in the child
    never overwrites another end."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


@contextlib.contextmanager
def chromium(timeout: float = 60.0) -> Iterator[Chromium]:
    """A headless Chromium with one blank page attached; stopped on exit."""
    path = binary()
    if path is None:
        raise ChromiumError("chromium not on PATH (scripts/bootstrap installs Debian's chromium)")
    with tempfile.TemporaryDirectory(prefix="helios-chromium-") as profile:
        commands_r, commands_w = (_high(fd) for fd in os.pipe())
        events_r, events_w = (_high(fd) for fd in os.pipe())

        def fds() -> None:  # in the child: its fd 3 reads our commands, its fd 4 answers
            os.dup2(commands_r, 3)
            os.dup2(events_w, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        proc = subprocess.Popen(
            [path, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # preexec_fn: the only way to place the pipe on fds 3 and 4; nothing else runs threads
            # in the processes that use this (tests, the screenshot script) while it starts.
            preexec_fn=fds, close_fds=False)  # noqa: PLW1509
        os.close(commands_r)
        os.close(events_w)
        browser = Chromium(proc, commands_w, events_r)
        try:
            target = browser.call("Target.createTarget", {"url": "about:blank"}, timeout,
                                  browser=True)
            attached = browser.call("Target.attachToTarget", {
                "targetId": target["targetId"], "flatten": True}, timeout, browser=True)
            browser.session = attached["sessionId"]
            for domain in ("Page", "Network", "Log", "Runtime"):
                browser.call(f"{domain}.enable", timeout=timeout)
            yield browser
        finally:
            with contextlib.suppress(OSError, ChromiumError):
                browser.call("Browser.close", timeout=5, browser=True)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            os.close(commands_w)
            os.close(events_r)
