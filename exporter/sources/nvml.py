"""NVML source: one poll reads every GPU through nvidia-ml-py (`pynvml`) into a `GpuReport`.

Values are converted to base units here (mW -> W, mJ -> J, MHz -> Hz, percent -> 0-1); the
collector only renders. Failures (table in docs/gpu.md): no library / nvmlInit failing -> reason
`library`, retried every poll; the driver going away -> `driver`, nvmlInit again next poll; a lost
or hung GPU -> that GPU down, the poll still succeeds; an unsupported field -> absent, logged once
per (gpu, field). Each GPU is read by its own daemon thread, waited for at most `gpu_timeout`, so
one stuck GPU does not stall the others; a hang in the device-list calls is bounded by the
`BoundedRunner` around `poll()`. pynvml keeps its library in module globals: one source per process.
"""

from __future__ import annotations

import ctypes
import functools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import pynvml
import structlog

from exporter.labels import ErrorReason
from exporter.sources.base import Result
from exporter.sources.gpu_report import GpuReport, GpuStats, sanitize, throttle_reasons

log = structlog.get_logger("helios_exporter.nvml")

T = TypeVar("T")

DEFAULT_LIBRARY: Final = "libnvidia-ml.so.1"

# nvmlReturn_t values (nvml.h; part of the ABI).
NOT_SUPPORTED: Final = 3
FUNCTION_NOT_FOUND: Final = 13
GPU_IS_LOST: Final = 15
ARGUMENT_VERSION_MISMATCH: Final = 25
# After these, the library handle is useless until nvmlInit succeeds again.
REINIT_CODES: Final = frozenset({1, 9, 12, 18})  # uninitialized, driver not loaded, lib, RM mismatch

class _PollFailed(Exception):
    def __init__(self, reason: ErrorReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _GpuLost(Exception):
    pass


class _DriverGone(Exception):
    pass


def _bind_library(path: str | None) -> None:
    """Point pynvml at `path` (or its default soname) before nvmlInit; raises OSError."""
    wanted = path or DEFAULT_LIBRARY
    with pynvml.libLoadLock:
        current = pynvml.nvmlLib
        if current is None and path is None:
            return  # pynvml loads its default itself
        if current is not None and getattr(current, "_name", None) == wanted:
            return
        # A different library was bound (tests switch between fake builds): cached function
        # pointers belong to it.
        pynvml.nvmlLib = None
        getattr(pynvml, "_nvmlGetFunctionPointer_cache", {}).clear()
        if path is not None:
            pynvml.nvmlLib = ctypes.CDLL(path)


class _Call:
    """One GPU read handed to that GPU's worker thread."""

    def __init__(self, fn: Callable[[], GpuStats]) -> None:
        self.done = threading.Event()
        self.value: GpuStats | None = None
        self.error: BaseException | None = None
        self.fn = fn

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:  # handed to the poll thread
            self.error = exc
        finally:
            self.done.set()


class _Worker:
    """One daemon thread per GPU index: a stuck NVML call blocks only its own GPU, and never
    interpreter exit. Reused across polls (starting a thread costs more than reading a GPU)."""

    def __init__(self, index: int) -> None:
        self._jobs: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=f"nvml-gpu{index}", daemon=True).start()

    def _loop(self) -> None:
        while (call := self._jobs.get()) is not None:
            call.run()

    def submit(self, fn: Callable[[], GpuStats]) -> _Call:
        call = _Call(fn)
        self._jobs.put(call)
        return call

    def stop(self) -> None:
        self._jobs.put(None)


class NvmlSource:
    """Blocking NVML poller; `poll()` never raises. Wrap it in a `BoundedRunner`."""

    def __init__(self, library_path: str | None = None, *, gpu_timeout: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.library_path = library_path
        self.gpu_timeout = gpu_timeout
        self._clock = clock
        self._initialized = False
        self._outage_logged = False
        self._workers: dict[int, _Worker] = {}
        self._pending: dict[int, _Call] = {}
        self._uuids: dict[int, str] = {}
        self._gpu_up: dict[int, bool] = {}
        self._missing: set[str] = set()  # functions this library lacks (FUNCTION_NOT_FOUND)
        self._noted: set[tuple[int, str]] = set()
        self._noted_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------
    def poll(self) -> Result[GpuReport]:
        started, t0 = self._clock(), time.perf_counter()
        try:
            report = self._poll()
        except _PollFailed as exc:
            return Result(None, started, time.perf_counter() - t0, exc.reason, str(exc))
        except Exception as exc:  # a source never raises
            log.exception("nvml_poll_bug")
            return Result(None, started, time.perf_counter() - t0, ErrorReason.OTHER,
                          f"{type(exc).__name__}: {exc}")
        return Result(report, started, time.perf_counter() - t0)

    def close(self) -> None:
        for worker in self._workers.values():
            worker.stop()  # a stuck one ends after its call returns
        self._workers.clear()
        if self._initialized:
            self._initialized = False
            try:
                pynvml.nvmlShutdown()
            except Exception as exc:
                log.debug("nvml_shutdown_failed", error=str(exc))

    def _ensure_init(self) -> None:
        if self._initialized:
            return
        library = self.library_path or DEFAULT_LIBRARY
        try:
            _bind_library(self.library_path)
            pynvml.nvmlInit()
        except (OSError, pynvml.NVMLError) as exc:
            message = f"NVML unavailable ({library}): {exc}"
            if not self._outage_logged:
                self._outage_logged = True
                log.warning("nvml_unavailable", library=library, error=str(exc),
                            hint="GPU metrics absent; retried every poll")
            raise _PollFailed(ErrorReason.LIBRARY, message) from None
        self._initialized = True
        self._outage_logged = False
        self._missing.clear()
        log.info("nvml_initialized", library=library)

    def _lose_driver(self, what: str, exc: BaseException) -> _PollFailed:
        """Forget the NVML session so the next poll calls nvmlInit again."""
        if self._initialized:
            self._initialized = False
            try:
                pynvml.nvmlShutdown()
            except Exception as shutdown_exc:
                log.debug("nvml_shutdown_failed", error=str(shutdown_exc))
        if not self._outage_logged:
            self._outage_logged = True
            log.warning("nvml_driver_lost", call=what, error=str(exc),
                        hint="re-initialising at the next poll")
        return _PollFailed(ErrorReason.DRIVER, f"{what}: {exc}")

    # -- one poll --------------------------------------------------------------------------
    def _poll(self) -> GpuReport:
        self._ensure_init()
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except pynvml.NVMLError as exc:
            if exc.value in REINIT_CODES:
                raise self._lose_driver("nvmlDeviceGetCount", exc) from None
            raise _PollFailed(ErrorReason.DRIVER, f"nvmlDeviceGetCount: {exc}") from None
        driver: str | None = None
        try:
            driver = sanitize(pynvml.nvmlSystemGetDriverVersion(), 32)
        except pynvml.NVMLError as exc:
            if exc.value in REINIT_CODES:
                raise self._lose_driver("nvmlSystemGetDriverVersion", exc) from None
            self._note(-1, "driver_version", str(exc))
        except UnicodeDecodeError as exc:
            self._note(-1, "driver_version", str(exc))

        calls: dict[int, _Call] = {}
        for index in range(count):
            pending = self._pending.get(index)
            if pending is not None and not pending.done.is_set():
                calls[index] = pending  # still stuck from an earlier poll: do not stack reads
            else:
                worker = self._workers.get(index)
                if worker is None:
                    worker = self._workers[index] = _Worker(index)
                calls[index] = self._pending[index] = worker.submit(
                    functools.partial(self._read_gpu, index))
        deadline = time.monotonic() + self.gpu_timeout
        for call in calls.values():
            call.done.wait(max(0.0, deadline - time.monotonic()))

        gpus: list[GpuStats] = []
        for index, call in calls.items():
            if not call.done.is_set():
                stats = self._down(index, ErrorReason.HUNG)
            elif isinstance(call.error, _DriverGone):
                raise self._lose_driver("per-GPU read", call.error.__cause__ or call.error)
            elif call.error is not None or call.value is None:
                self._note(index, "read", repr(call.error))
                stats = self._down(index, ErrorReason.OTHER)
            else:
                stats = call.value
            self._log_transition(stats)
            gpus.append(stats)
        return GpuReport(driver, tuple(gpus))

    def _down(self, index: int, reason: ErrorReason) -> GpuStats:
        return GpuStats(index=index, uuid=self._uuids.get(index, ""), up=False, down_reason=reason)

    def _log_transition(self, stats: GpuStats) -> None:
        was_up = self._gpu_up.get(stats.index)
        self._gpu_up[stats.index] = stats.up
        if stats.up and was_up is False:
            log.info("gpu_recovered", gpu=stats.index, uuid=stats.uuid)
        elif not stats.up and was_up is not False:
            log.warning("gpu_down", gpu=stats.index, uuid=stats.uuid,
                        reason=str(stats.down_reason))

    def _note(self, index: int, field: str, error: str) -> None:
        """Log an unavailable field once per (gpu, field): no error storm every poll."""
        with self._noted_lock:
            if (index, field) in self._noted:
                return
            self._noted.add((index, field))
        log.info("nvml_field_unavailable", gpu=index if index >= 0 else None, field=field,
                 error=error)

    # -- one GPU (runs in its own thread) --------------------------------------------------
    def _read_gpu(self, index: int) -> GpuStats:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = sanitize(pynvml.nvmlDeviceGetUUID(handle), 96)
        except pynvml.NVMLError as exc:
            if exc.value in REINIT_CODES:
                raise _DriverGone() from exc
            if exc.value != GPU_IS_LOST:
                self._note(index, "handle", str(exc))
            return self._down(
                index, ErrorReason.GPU_LOST if exc.value == GPU_IS_LOST else ErrorReason.OTHER)
        except UnicodeDecodeError as exc:
            self._note(index, "uuid", str(exc))
            return self._down(index, ErrorReason.OTHER)
        self._uuids[index] = uuid
        try:
            return self._read_fields(index, uuid, handle)
        except _GpuLost:
            return self._down(index, ErrorReason.GPU_LOST)

    def _field(self, index: int, field: str, read: Callable[[], T]) -> T | None:
        try:
            return read()
        except pynvml.NVMLError as exc:
            if exc.value == GPU_IS_LOST:
                raise _GpuLost() from exc
            if exc.value in REINIT_CODES:
                raise _DriverGone() from exc
            self._note(index, field, str(exc))
        except UnicodeDecodeError as exc:
            self._note(index, field, str(exc))
        return None

    def _first(self, names: tuple[str, ...], *args: Any) -> Any:
        """Call the first of `names` that this library has (newer API first)."""
        for name in names[:-1]:
            fn = getattr(pynvml, name, None)
            if fn is None or name in self._missing:
                continue
            try:
                return fn(*args)
            except pynvml.NVMLError as exc:
                if exc.value not in (FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH):
                    raise
                self._missing.add(name)
        return getattr(pynvml, names[-1])(*args)

    def _read_fields(self, index: int, uuid: str, h: Any) -> GpuStats:
        f = self._field
        mem = f(index, "memory", lambda: pynvml.nvmlDeviceGetMemoryInfo(h))
        util = f(index, "utilization", lambda: pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
        power = f(index, "power", lambda: pynvml.nvmlDeviceGetPowerUsage(h))
        limit = f(index, "power_limit", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h))
        energy = f(index, "energy", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
        temp = f(index, "temperature", lambda: self._first(
            ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"), h,
            pynvml.NVML_TEMPERATURE_GPU))
        sm = f(index, "sm_clock", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
        memclk = f(index, "memory_clock",
                   lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM))
        mask = f(index, "throttle_reasons", lambda: self._first(
            ("nvmlDeviceGetCurrentClocksEventReasons",
             "nvmlDeviceGetCurrentClocksThrottleReasons"), h))
        corrected = f(index, "ecc", lambda: pynvml.nvmlDeviceGetTotalEccErrors(
            h, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC))
        uncorrected = f(index, "ecc", lambda: pynvml.nvmlDeviceGetTotalEccErrors(
            h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC))
        name = f(index, "name", lambda: pynvml.nvmlDeviceGetName(h))
        return GpuStats(
            index=index,
            uuid=uuid,
            up=True,
            name=None if name is None else sanitize(name),
            memory_used_bytes=None if mem is None else int(mem.used),
            memory_total_bytes=None if mem is None else int(mem.total),
            utilization_ratio=None if util is None else int(util) / 100,
            power_watts=None if power is None else int(power) / 1000,
            power_limit_watts=None if limit is None else int(limit) / 1000,
            energy_joules=None if energy is None else int(energy) / 1000,
            temperature_celsius=None if temp is None else float(temp),
            sm_clock_hertz=None if sm is None else float(int(sm) * 1_000_000),
            memory_clock_hertz=None if memclk is None else float(int(memclk) * 1_000_000),
            throttle_reasons=None if mask is None else throttle_reasons(int(mask)),
            ecc_corrected=None if corrected is None else int(corrected),
            ecc_uncorrected=None if uncorrected is None else int(uncorrected),
        )
