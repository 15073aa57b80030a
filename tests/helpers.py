"""Test helpers shared by several test modules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, NoReturn

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def missing(reason: str) -> NoReturn:
    """A tool scripts/bootstrap installs is missing: a failure under CI (CI set), else a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; run scripts/bootstrap", pytrace=False)
    pytest.skip(f"{reason} (run scripts/bootstrap)")


def contract_example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "snapshots" / "contract_example.json").read_text())
    return data


def promtool_check_metrics(text: bytes) -> None:
    """Fail the test unless `promtool check metrics` accepts the exposition."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not on PATH (scripts/bootstrap installs Debian's prometheus)")
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          check=False, timeout=30)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()


def check_golden(text: bytes, path: Path, update: bool) -> None:
    """`text` is a valid exposition equal to the golden file (`--update-golden` rewrites it)."""
    if update:
        path.write_bytes(text)
    promtool_check_metrics(text)
    assert path.exists(), f"missing {path}: run pytest --update-golden and review the diff"
    assert text.decode() == path.read_text()


class StubEngine:
    """An httpx.MockTransport handler serving a snapshot and a /metrics text that tests mutate."""

    def __init__(self, snapshot: dict[str, Any] | bytes | None = None, metrics: str = "") -> None:
        self.snapshot = contract_example() if snapshot is None else snapshot
        self.metrics = metrics
        self.status = 200
        self.requests: list[str] = []

    def __call__(self, request: Any) -> Any:
        import httpx

        self.requests.append(request.url.path)
        if self.status != 200:
            return httpx.Response(self.status, text="<html>error</html>")
        if request.url.path == "/debug/offload/snapshot":
            body = self.snapshot if isinstance(self.snapshot, bytes) else json.dumps(self.snapshot)
            return httpx.Response(200, content=body)
        if request.url.path == "/metrics":
            return httpx.Response(200, text=self.metrics)
        return httpx.Response(404)


def make_sidecar(engine: StubEngine, state_dir: Path, **overrides: Any) -> Any:
    """A fully assembled sidecar whose engine client talks to `engine` in memory."""
    import httpx

    from exporter.config import Config
    from exporter.sidecar import build

    config = Config(engine_url="http://engine.invalid", state_dir=state_dir, no_nvml=True,
                    **overrides)
    return build(config, transport=httpx.MockTransport(engine))


def tracked_copy(dest: Path) -> Path:
    """The tracked files of this checkout, as they are in the work tree, copied under `dest` (a
    clone that also holds uncommitted edits); skips outside a git checkout."""
    root = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None:
        missing("git not on PATH")
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                            check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no tracked files to copy")
    for name in listed.stdout.decode().split("\0"):
        source = root / name
        if name and source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest
