"""A few slots for slow work, handed out best priority first, one of them kept for the best, with
a bounded wait list.

Basic auth's bcrypt checks take one each (exporter/web/basic_auth.py). Priority 0 is a client
with no failed credentials on record, 1 one with some. `slots` checks run at once, but priority 1
holds at most `slots - reserved` of them: guessers, however many, share what is left, and
Prometheus's check (priority 0) finds a slot free unless other clean clients hold them all. A
slot that frees goes to the best waiter that may take it (then first come). At most `waiting`
wait; when the list is full, a newcomer with a better priority than the worst waiter takes its
place (that waiter's `slot` raises `Full`), otherwise the newcomer is refused (`Full`) at once.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


class Full(Exception):
    """No slot now and no place in the wait list."""


@dataclass(order=True)
class _Waiter:
    priority: int
    seq: int
    future: asyncio.Future[None] = field(compare=False)


class Gate:
    def __init__(self, slots: int, waiting: int, reserved: int = 1) -> None:
        self._slots, self._max_waiting = slots, waiting
        self._reserved = min(reserved, slots - 1)  # priority 1 always gets one slot at least
        self._held = {0: 0, 1: 0}
        self._waiting: list[_Waiter] = []  # best first
        self._seq = itertools.count()

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def slot(self, priority: int) -> AsyncIterator[None]:
        """Hold a slot (priority 0 or 1). Raises `Full`."""
        level = 0 if priority <= 0 else 1
        await self._acquire(level)
        try:
            yield
        finally:
            self._held[level] -= 1
            self._dispatch()

    def _may(self, level: int) -> bool:
        if self._held[0] + self._held[1] >= self._slots:
            return False
        return level == 0 or self._held[1] < self._slots - self._reserved

    async def _acquire(self, level: int) -> None:
        ahead = [w for w in self._waiting if w.priority <= level]
        if not ahead and self._may(level):
            self._held[level] += 1
            return
        if len(self._waiting) >= self._max_waiting:
            worst = self._waiting[-1]
            if worst.priority <= level:
                raise Full
            self._waiting.pop()
            worst.future.set_exception(Full())
        waiter = _Waiter(level, next(self._seq), asyncio.get_running_loop().create_future())
        bisect.insort(self._waiting, waiter)
        try:
            await waiter.future  # resolved by _dispatch, with the slot counted as held
        except BaseException:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            elif not waiter.future.cancelled() and waiter.future.exception() is None:
                self._held[level] -= 1  # granted while being cancelled: give it back
                self._dispatch()
            raise

    def _dispatch(self) -> None:
        """Grant free slots to the best waiters that may take them."""
        for waiter in list(self._waiting):
            if waiter.future.done():
                self._waiting.remove(waiter)
            elif self._may(waiter.priority):
                self._waiting.remove(waiter)
                self._held[waiter.priority] += 1
                waiter.future.set_result(None)
