"""Run a blocking source (NVML, psutil) off the event loop with a time bound.

A call that overruns its bound is reported as `hung` and is not waited for; while it is still
stuck, no second call is started (the thread is not stacked up), and every poll reports `hung`
until it returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from exporter.labels import ErrorReason
from exporter.sources.base import Result

T = TypeVar("T")


class BoundedRunner(Generic[T]):
    def __init__(self, name: str, call: Callable[[], Result[T]], timeout: float) -> None:
        self.name = name
        self.call = call
        self.timeout = timeout
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"src-{name}")
        self._pending: Future[Result[T]] | None = None

    async def poll(self) -> Result[T]:
        started, t0 = time.time(), time.perf_counter()
        if self._pending is not None and not self._pending.done():
            return Result(None, started, 0.0, ErrorReason.HUNG,
                          f"{self.name}: previous call still running")
        self._pending = self._executor.submit(self.call)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(self._pending), self.timeout)
        except TimeoutError:
            return Result(None, started, time.perf_counter() - t0, ErrorReason.HUNG,
                          f"{self.name}: call exceeded {self.timeout}s")
        except Exception as exc:  # a source must not raise, but a bug must not kill the poller
            return Result(None, started, time.perf_counter() - t0, ErrorReason.OTHER,
                          f"{self.name}: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
