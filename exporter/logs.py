"""One log stream on stderr: structlog events and the standard library's records, one format.

The sidecar's own events are structlog key/value events. uvicorn, httpx, asyncio and `warnings`
log through the standard library; their records go through the same structlog processors
(`ProcessorFormatter`'s foreign_pre_chain) and out of the same handler, so with `json` or
`logfmt` every line on stderr parses, and lines from different threads never interleave.
"""

from __future__ import annotations

import logging
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


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to whatever `sys.stderr` is when a record is emitted (pytest's
    capture replaces it; a handler bound at configure time would outlive the captured stream)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


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
