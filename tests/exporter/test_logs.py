from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from exporter import logs
from tests.helpers import StubEngine, make_sidecar

# Loggers these tests write to. Other tests in the same process may have configured them (the
# simulator's in-process uvicorn installs its own handler on `uvicorn`, without propagation):
# each test here starts from the state a fresh `serve` process has.
LIBRARY_LOGGERS = ("uvicorn", "uvicorn.error", "asyncio", "py.warnings", "httpx", "httpcore")


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """logs.configure changes process-wide state: give it back to pytest after each test."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    loggers = [logging.getLogger(), *map(logging.getLogger, LIBRARY_LOGGERS)]
    saved = [(lg, lg.level, list(lg.handlers), lg.propagate, lg.disabled) for lg in loggers]
    for lg in loggers[1:]:
        lg.setLevel(logging.NOTSET)
        lg.handlers[:] = []
        lg.propagate, lg.disabled = True, False
    logs.CONTEXT.clear()
    yield
    structlog.reset_defaults()
    logging.captureWarnings(False)
    for lg, level, handlers, propagate, disabled in saved:
        lg.setLevel(level)
        lg.handlers[:] = handlers
        lg.propagate, lg.disabled = propagate, disabled
    logs.CONTEXT.clear()


def _written(capsys: pytest.CaptureFixture[str]) -> Any:
    assert logs.flush(5.0)  # lines go out through the writer thread
    return capsys.readouterr()


def test_json_lines_carry_generation_and_phase(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    logs.configure("json", "info")
    sidecar = make_sidecar(StubEngine(), tmp_path)

    async def run() -> None:
        await sidecar.loop.cycle()
        await sidecar.client.aclose()

    asyncio.run(run())
    sidecar.close()
    structlog.get_logger("t").info("after_poll", detail=1)
    lines = [json.loads(line) for line in _written(capsys).err.splitlines() if line.strip()]
    last = lines[-1]
    assert last["event"] == "after_poll"
    assert last["generation"] == "g-20261129T0412Z-7f3a"
    assert last["phase"] == "serving"
    assert last["level"] == "info" and "timestamp" in last


def test_standard_library_records_join_the_json_stream(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("json", "info")
    logs.CONTEXT["generation"] = "g-1"
    logging.getLogger("uvicorn.error").warning("Invalid HTTP request received.")
    logging.getLogger("asyncio").error("Task exception was never retrieved %s", "x")
    warnings.warn("deprecated thing", DeprecationWarning, stacklevel=1)
    try:
        raise ValueError("boom")
    except ValueError:
        structlog.get_logger("helios_exporter.t").exception("failed")
    err = _written(capsys).err
    events = [json.loads(line) for line in err.splitlines()]
    assert [(e["logger"], e["level"], e["event"].strip()) for e in events] == [
        ("uvicorn.error", "warning", "Invalid HTTP request received."),
        ("asyncio", "error", "Task exception was never retrieved x"),
        ("py.warnings", "warning", events[2]["event"].strip()),
        ("helios_exporter.t", "error", "failed"),
    ]
    assert "DeprecationWarning: deprecated thing" in events[2]["event"]
    assert all(e["generation"] == "g-1" and "timestamp" in e for e in events)
    assert "ValueError: boom" in events[3]["exception"]


def test_logfmt_keeps_one_event_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("logfmt", "info")
    note = 'line one\r\nline two\u2028three "quoted" \x1b[31m'
    structlog.get_logger("helios_exporter.t").info("restore_event", note=note, n=3)
    logging.getLogger("uvicorn.error").warning("bad\rrequest")
    lines = _written(capsys).err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("timestamp=") and " level=info event=restore_event " in lines[0]
    assert 'note="line one\\\\x0d\\nline two\\\\u2028three \\"quoted\\" \\\\x1b[31m"' in lines[0]
    assert "event=bad\\x0drequest" in lines[1] and "logger=uvicorn.error" in lines[1]


def test_library_request_lines_only_at_debug() -> None:
    logs.configure("json", "info")
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    assert logging.getLogger("uvicorn.error").isEnabledFor(logging.INFO)
    logs.configure("json", "debug")
    assert logging.getLogger("httpx").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("httpcore").isEnabledFor(logging.INFO)


def test_an_uncaught_exception_is_one_json_event(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("json", "info")
    try:
        raise RuntimeError("crash")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    (line,) = _written(capsys).err.splitlines()
    event = json.loads(line)
    assert event["event"] == "uncaught_exception" and event["level"] == "critical"
    assert "RuntimeError: crash" in event["exception"]


def test_a_blocked_sink_drops_and_counts_and_never_blocks_the_logger(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer thread stuck in a write (a pipe nobody reads): logging goes on at once, the
    lines past the queue are dropped and counted, and flush says it could not finish."""
    release = threading.Event()

    class Stuck:
        def write(self, _: str) -> int:
            release.wait(30)
            return 0

        def flush(self) -> None:
            pass

    writer = logs._Writer(size=50)
    monkeypatch.setattr(sys, "stderr", Stuck())
    for i in range(300):  # returns while the sink is still stuck: no put waited on it
        writer.put(f"line {i}")
    assert not release.is_set() and not writer.flush(0.2)
    # One batch may be in the stuck write; the queue holds 50; the rest are dropped.
    assert 300 - 50 - 256 <= writer.dropped <= 300 - 50
    assert writer.dropped > 0
    release.set()
    assert writer.flush(5.0)
