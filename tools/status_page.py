"""The on-call page's story with real processes: a simulated engine, a sidecar, a restore window
opened by a drain, and a restore into the wrong container; and screenshots of it in Chromium.

Shared by tests/e2e/test_status_page_e2e.py and the pictures in docs/status-page.md:

    .venv/bin/python -m tools.status_page docs/status-page

(starts its own processes on free ports of 127.0.0.1 and stops them; needs Debian's chromium).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from simulator.config import EngineConfig
from tools.chromium import Chromium, chromium
from tools.harness import Proc, Procs, wait_until

# Long bounds, so that both deadlines are ahead while the pictures are taken; a fast poll and a
# short grace, so that each step shows within a second; the pins the simulated engine meets.
SIDECAR_ARGS = ("--poll-interval", "0.3", "--down-grace", "1", "--request-cutoff", "4200",
                "--restore-bound", "5400", "--expect-checkpoint", EngineConfig.checkpoint,
                "--expect-package", EngineConfig.package,
                "--expect-ranks", str(EngineConfig.num_ranks))
DESKTOP = {"width": 1100, "height": 900}
PHONE = {"width": 390, "height": 844, "mobile": True}


def status(sidecar: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(sidecar + "/status", timeout=3).json()
    return data


def start(procs: Procs, *extra: str) -> tuple[str, str, Proc]:
    """A simulated engine (steady traffic) and its sidecar: their base URLs, the sidecar."""
    _, engine = procs.simulator("steady", "--rate", "2")
    proc, sidecar = procs.sidecar(engine, *SIDECAR_ARGS, *extra)
    wait_until(lambda: status(sidecar)["engine_up"], 30, "the sidecar sees the engine", proc)
    return engine, sidecar, proc


def admin(engine: str, what: str, body: dict[str, Any] | None = None) -> None:
    httpx.post(f"{engine}/admin/{what}", json=body or {}, timeout=5).raise_for_status()


def open_window(engine: str, sidecar: str) -> dict[str, Any]:
    """The engine starts draining: the sidecar opens a window (cause `drain`)."""
    admin(engine, "admission", {"state": "draining"})
    window: dict[str, Any] = wait_until(lambda: status(sidecar)["restore"]["window"], 30,
                                        "a restore window opens")
    return window


def restore_into_new_container(engine: str, sidecar: str) -> dict[str, Any]:
    """The engine stops and comes back in a new container: the window closes, `container`
    fails. Returns /status after the close."""
    admin(engine, "crash")
    wait_until(lambda: status(sidecar)["restore"]["phase"] == "down", 30, "phase down")
    admin(engine, "restart", {"container": "new"})
    wait_until(lambda: status(sidecar)["restore"]["last_window"], 30, "the window closes")
    return status(sidecar)


def shoot(browser: Chromium, url: str, path: Path, full: bool = True, **viewport: Any) -> str:
    """Load the page at this viewport, take a screenshot (of the whole page, or of the first
    screen); the page's text."""
    browser.open(url, **viewport)
    browser.screenshot(path, full)
    return browser.text()


def pictures(out: Path) -> list[Path]:
    """The screenshots of docs/status-page.md, taken from a fresh run."""
    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="helios-status-page-") as tmp:
        procs = Procs(Path(tmp))
        try:
            engine, sidecar, _ = start(procs)
            with chromium() as browser:
                open_window(engine, sidecar)
                for name, viewport in (("window-open-desktop", DESKTOP),
                                       ("window-open-phone", PHONE)):
                    shots.append(out / f"{name}.png")
                    # The phone: its first screen, what a person sees on opening the page.
                    shoot(browser, sidecar + "/", shots[-1], viewport is DESKTOP, **viewport)
                restore_into_new_container(engine, sidecar)
                for name, viewport in (("wrong-container-desktop", DESKTOP),
                                       ("wrong-container-phone", PHONE)):
                    shots.append(out / f"{name}.png")
                    shoot(browser, sidecar + "/", shots[-1], viewport is DESKTOP, **viewport)
        finally:
            procs.stop_all()
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory for the PNG files")
    args = parser.parse_args(argv)
    # SIGTERM stops the child processes too (through the finally above).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    for path in pictures(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
