"""`helios-exporter demo` as a child process of a test, its output in a file, its temporary
folder under the test's own folder (TMPDIR)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from tools.harness import PYTHON, ROOT

# Starts the demo with SIGINT's disposition set first (a shell's background job inherits it as
# ignored, an interactive one as default), whatever this test process's own is.
WITH_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, getattr(signal, sys.argv[1]));"
               " os.execv(sys.executable, [sys.executable, '-m', 'commands', 'demo', *sys.argv[2:]])")


class DemoRun:
    def __init__(self, tmp: Path, *argv: str, env: dict[str, str] | None = None,
                 sigint: str | None = None) -> None:
        """`sigint`: "SIG_IGN" or "SIG_DFL", the disposition the demo starts with."""
        self.tmp = tmp / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.out = tmp / "demo.out"
        start = [PYTHON, "-c", WITH_SIGINT, sigint] if sigint else [PYTHON, "-m", "commands", "demo"]
        with self.out.open("wb") as out:
            self.proc = subprocess.Popen(
                [*start, *argv], stdout=out, stderr=subprocess.STDOUT,
                cwd=ROOT, env={**os.environ, "TMPDIR": str(self.tmp), "PYTHONUNBUFFERED": "1",
                               **(env or {})})

    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if self.proc.poll() is not None:
                raise AssertionError(f"demo exited ({self.proc.returncode}) before {text!r}:\n"
                                     + self.output())
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout}s:\n" + self.output())
            time.sleep(0.2)

    def folder(self) -> Path:
        found = re.search(r"(\S+/helios-demo-\w+)", self.output())
        assert found, self.output()
        return Path(found.group(1))

    def leftovers(self) -> list[Path]:
        return sorted(self.tmp.glob("helios-demo-*"))

    def ports(self) -> dict[str, int]:
        """The port of every URL in the header, by its row's name."""
        return {m.group(1).strip(): int(m.group(2)) for m in re.finditer(
            r"^  ([a-z ]+?)\s+http://127\.0\.0\.1:(\d+)", self.output(), re.MULTILINE)}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
