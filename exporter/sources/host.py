"""Host source (psutil): the engine process and host memory.

The engine process is found by `pid_file` (a file holding its pid) or, without one, by
`process_name` (the first process, lowest pid first, whose name or `cmdline[0]` basename matches;
the sidecar itself is skipped). It is re-resolved at every poll, so a restarted engine is found
again (its new start time is the restart evidence). In Kubernetes the sidecar only sees the
engine's processes with `shareProcessNamespace: true` (docs/gpu.md).

A poll whose engine process is missing or unreadable still returns the host values:
the `Result` carries the partial report *and* the reason (`not_found` / `permission`), so the
source is shown down while host memory stays exported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import structlog

from exporter.labels import ErrorReason
from exporter.sources.base import Result

log = structlog.get_logger("helios_exporter.host")


@dataclass(frozen=True, slots=True)
class ProcessStats:
    resident_bytes: int
    cpu_seconds: float  # user + system
    threads: int
    start_time_seconds: float  # unix seconds (psutil create_time)


@dataclass(frozen=True, slots=True)
class HostReport:
    memory_available_bytes: int | None
    memory_total_bytes: int | None
    engine_configured: bool  # a pid file or a process name was given
    engine_up: bool | None  # None when unknown (not configured, pid file unreadable)
    engine: ProcessStats | None  # None when not found or not readable


def process_stats(proc: psutil.Process) -> ProcessStats:
    """Read one process; raises psutil.NoSuchProcess / AccessDenied."""
    with proc.oneshot():
        cpu = proc.cpu_times()
        return ProcessStats(
            resident_bytes=int(proc.memory_info().rss),
            cpu_seconds=float(cpu.user + cpu.system),
            threads=int(proc.num_threads()),
            start_time_seconds=float(proc.create_time()),
        )


class _Missing(Exception):
    def __init__(self, reason: ErrorReason, message: str, up: bool | None) -> None:
        super().__init__(message)
        self.reason = reason
        self.up = up


class HostSource:
    """Blocking psutil poller; `poll()` never raises."""

    def __init__(self, pid_file: Path | None, process_name: str | None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.pid_file = pid_file
        self.process_name = process_name
        self._clock = clock
        self._engine: psutil.Process | None = None
        self._engine_start: float | None = None

    @property
    def engine_configured(self) -> bool:
        return self.pid_file is not None or bool(self.process_name)

    def poll(self) -> Result[HostReport]:
        started, t0 = self._clock(), time.perf_counter()
        reason: ErrorReason | None = None
        message = ""
        available: int | None = None
        total: int | None = None
        try:
            mem = psutil.virtual_memory()
            available, total = int(mem.available), int(mem.total)
        except Exception as exc:
            reason, message = ErrorReason.OTHER, f"virtual_memory: {exc}"
        engine_up: bool | None = None
        engine: ProcessStats | None = None
        if self.engine_configured:
            try:
                engine = self._engine_stats()
                engine_up = True
            except _Missing as exc:
                engine_up = exc.up
                reason, message = exc.reason, str(exc)
            except Exception as exc:  # a source never raises
                reason, message = ErrorReason.OTHER, f"engine process: {exc}"
        report = HostReport(available, total, self.engine_configured, engine_up, engine)
        return Result(report, started, time.perf_counter() - t0, reason, message)

    # -- the engine process ----------------------------------------------------------------
    def _engine_stats(self) -> ProcessStats:
        proc = self._resolve()
        try:
            stats = process_stats(proc)
        except psutil.AccessDenied:
            raise _Missing(ErrorReason.PERMISSION,
                           f"access denied reading engine process {proc.pid}", True) from None
        except psutil.NoSuchProcess:  # exited between resolving and reading (zombies too)
            self._engine = None
            raise _Missing(ErrorReason.NOT_FOUND, f"engine process {proc.pid} exited",
                           False) from None
        if stats.start_time_seconds != self._engine_start:
            if self._engine_start is not None:
                log.warning("engine_process_restarted", pid=proc.pid,
                            start_time=stats.start_time_seconds,
                            previous_start_time=self._engine_start)
            else:
                log.info("engine_process_found", pid=proc.pid, start_time=stats.start_time_seconds)
            self._engine_start = stats.start_time_seconds
        return stats

    def _resolve(self) -> psutil.Process:
        if self.pid_file is not None:
            pid = self._read_pid(self.pid_file)
            if self._engine is None or self._engine.pid != pid or not self._engine.is_running():
                try:
                    self._engine = psutil.Process(pid)
                except psutil.NoSuchProcess:
                    self._engine = None
                    raise _Missing(ErrorReason.NOT_FOUND,
                                   f"no process {pid} (from {self.pid_file})", False) from None
                except psutil.AccessDenied:
                    raise _Missing(ErrorReason.PERMISSION, f"access denied to process {pid}",
                                   None) from None
            return self._engine
        if self._engine is not None and self._engine.is_running():
            return self._engine  # is_running also rejects a reused pid
        self._engine = self._find_by_name(self.process_name or "")
        return self._engine

    @staticmethod
    def _read_pid(path: Path) -> int:
        try:
            text = path.read_text(encoding="ascii", errors="replace").strip()
        except FileNotFoundError:
            raise _Missing(ErrorReason.NOT_FOUND, f"pid file {path} does not exist",
                           False) from None
        except PermissionError:
            raise _Missing(ErrorReason.PERMISSION, f"pid file {path} is not readable",
                           None) from None
        except OSError as exc:
            raise _Missing(ErrorReason.OTHER, f"pid file {path}: {exc.strerror}", None) from None
        if not text.isdigit() or int(text) <= 0:
            raise _Missing(ErrorReason.OTHER, f"pid file {path} does not hold a pid", None)
        return int(text)

    def _find_by_name(self, name: str) -> psutil.Process:
        me = os.getpid()
        denied = False
        for proc in psutil.process_iter(["name", "cmdline"]):
            if proc.pid == me:
                continue
            cmdline = proc.info.get("cmdline") or []
            argv0 = Path(cmdline[0]).name if cmdline else ""
            if name in (proc.info.get("name"), argv0):
                return proc
            denied = denied or proc.info.get("cmdline") is None
        if denied:
            # Some cmdlines could not be read: the engine may be among them.
            raise _Missing(ErrorReason.NOT_FOUND,
                           f"no process named {name!r} (some processes were not readable)", False)
        raise _Missing(ErrorReason.NOT_FOUND, f"no process named {name!r}", False)
