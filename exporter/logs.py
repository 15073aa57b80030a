"""One log stream on stderr: structlog events and the standard library's records, one format.

The sidecar's own events are structlog key/value events. uvicorn, httpx, asyncio and `warnings`
log through the standard library; their records go through the same structlog processors
(`ProcessorFormatter`'s foreign_pre_chain) and out of the same handler, so with `json` or
`logfmt` every line on stderr parses, and lines from different threads never interleave.

Nobody waits on stderr: a line is formatted where it is logged and put on a bounded queue
(`MAX_QUEUED_LINES`); one writer thread writes the queue out. When the sink blocks (a pipe
nobody reads), the queue fills and further lines are dropped and counted
(`helios_exporter_log_lines_dropped_total`): the event loop, /healthz and the stop on SIGTERM
never wait on a write. `flush()` waits, boundedly, for what is queued (tests; the exit).
"""

from __future__ import annotations

import atexit
import logging
import queue
import sys
import threading
from collections.abc import MutableMapping
from types import TracebackType
from typing import Any, Final

import structlog

from exporter.redact import redact_url

FORMATS: Final = ("auto", "json", "logfmt", "console")
LEVELS: Final = ("debug", "info", "warning", "error")

# Process-wide context bound into every log line (the current generation and restore phase).
# A plain dict, not contextvars: the poller task sets it and request handlers must see it too.
CONTEXT: dict[str, Any] = {}



def _add_context(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in CONTEXT.items():
        event.setdefault(key, value)
    return event


_LINE_BREAKS: Final = {ord(c): f"\\x{ord(c):02x}" for c in map(chr, range(0x20)) if c != "\n"}
_LINE_BREAKS.update({0x7F: "\\x7f", 0x85: "\\x85", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def _escape_controls(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """logfmt escapes only `\\n`: escape every other control and line-breaking character in
    string values too, so that no value (an event note, an engine error) can start a new line."""
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = value.translate(_LINE_BREAKS)
    return event


def _hide_url_passwords(record: logging.LogRecord) -> bool:
    """A library record's URL arguments without the password of their userinfo (httpx logs each
    request's URL at debug level, `--engine-url`'s credentials included; exporter/redact.py)."""
    if isinstance(record.args, tuple) and any(_userinfo_url(a) for a in record.args):
        record.args = tuple(redact_url(url) if (url := _userinfo_url(a)) else a
                            for a in record.args)
    return True


def _userinfo_url(arg: object) -> str | None:
    """`arg` as text when it is a URL with userinfo (a string, or httpx's URL)."""
    if not isinstance(arg, str) and type(arg).__name__ != "URL":
        return None
    text = str(arg)
    _, sep, rest = text.partition("://")
    return text if sep and "@" in rest.split("/", 1)[0] else None


MAX_QUEUED_LINES: Final = 2_000  # well under 1 MB of lines waiting at most
FLUSH_AT_EXIT: Final = 1.0  # seconds the exit waits for queued lines


class _Writer:
    """The bounded queue of formatted lines and the one daemon thread that writes it to
    whatever `sys.stderr` is at the time of the write (pytest's capture replaces it)."""

    def __init__(self, size: int = MAX_QUEUED_LINES) -> None:
        self.lines: queue.Queue[str] = queue.Queue(size)
        self.dropped = 0
        self._count = threading.Lock()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def put(self, line: str) -> None:
        if self._thread is None:
            self._begin()
        try:
            self.lines.put_nowait(line)
        except queue.Full:
            self._drop(1)

    def flush(self, timeout: float) -> bool:
        """Wait until every queued line is written, at most `timeout` seconds; whether it was."""
        with self.lines.all_tasks_done:
            return self.lines.all_tasks_done.wait_for(lambda: not self.lines.unfinished_tasks,
                                                      timeout)

    def _drop(self, n: int) -> None:
        with self._count:
            self.dropped += n

    def _begin(self) -> None:
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            batch = [self.lines.get()]
            while len(batch) < 256:
                try:
                    batch.append(self.lines.get_nowait())
                except queue.Empty:
                    break
            try:
                stream = sys.stderr
                stream.write("\n".join(batch) + "\n")
                stream.flush()
            except (OSError, ValueError):  # a closed or broken sink: the lines are lost
                self._drop(len(batch))
            finally:
                for _ in batch:
                    self.lines.task_done()


WRITER = _Writer()


def dropped() -> int:
    """Lines dropped because the sink did not take them in time (the queue was full)."""
    return WRITER.dropped


def flush(timeout: float = FLUSH_AT_EXIT) -> bool:
    """Wait, at most `timeout` seconds, until every line logged so far is written."""
    return WRITER.flush(timeout)


class _Stderr(logging.Handler):
    """Formats a record where it is logged and queues the line for the writer thread."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # as logging.StreamHandler: a bad record never raises to its caller
            self.handleError(record)
            return
        WRITER.put(line)


def _renderer(fmt: str) -> list[structlog.typing.Processor]:
    if fmt == "console" or (fmt == "auto" and sys.stderr.isatty()):
        return [structlog.dev.ConsoleRenderer()]
    if fmt == "logfmt":
        return [structlog.processors.format_exc_info, _escape_controls,
                structlog.processors.LogfmtRenderer(key_order=["timestamp", "level", "event"])]
    return [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]


def configure(fmt: str = "auto", level: str = "info") -> None:
    """Route structlog and the standard library's logging to one stderr handler in `fmt`."""
    numeric = getattr(logging, level.upper())
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_context,
        structlog.stdlib.add_logger_name,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    handler = _Stderr()
    handler.addFilter(_hide_url_passwords)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *_renderer(fmt)],
    ))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Stderr)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    # httpx logs every request at INFO (two per poll cycle; helios_exporter_engine_requests_total
    # counts them): only at --log-level debug. httpcore's debug lines carry response headers: never.
    logging.getLogger("httpx").setLevel(logging.DEBUG if numeric <= logging.DEBUG
                                        else max(numeric, logging.WARNING))
    logging.getLogger("httpcore").setLevel(max(numeric, logging.WARNING))
    logging.captureWarnings(True)  # `warnings.warn` output becomes a record, not a bare line
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread
    atexit.unregister(flush)
    atexit.register(flush)


def _log_uncaught(kind: type[BaseException], value: BaseException,
                  tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    structlog.get_logger("helios_exporter").critical("uncaught_exception",
                                                     exc_info=(kind, value, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return
    structlog.get_logger("helios_exporter").critical(
        "uncaught_exception", thread=getattr(args.thread, "name", None),
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback))
