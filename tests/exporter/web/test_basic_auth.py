"""Basic auth's checks, bounded and fair (exporter/web/basic_auth.py, exporter/web/gate.py): the
checks here are held open by the test (a check function that waits for the test's word, then
runs real bcrypt), so the order and the answers are certain whatever the machine's load."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from typing import Any

import bcrypt
import pytest
from structlog.testing import capture_logs

from exporter.web import hashes
from exporter.web.basic_auth import BasicAuth, Verdict, check_password

FAST = {name: bcrypt.hashpw(f"{name}-pw".encode(), bcrypt.gensalt(4))
        for name in ("alice", "bob", "carol")}


class Held:
    """A check that waits until the test releases that password (bcrypt then runs for real)."""

    def __init__(self) -> None:
        self.started: list[bytes] = []
        self.references: list[bytes] = []
        self._go: dict[bytes, threading.Event] = {}
        self._lock = threading.Lock()

    def gate(self, password: bytes) -> threading.Event:
        with self._lock:
            return self._go.setdefault(password, threading.Event())

    def release(self, password: bytes) -> None:
        self.gate(password).set()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.started.append(password)
            self.references.append(hashed)
        assert self.gate(password).wait(10)
        return check_password(password, hashed)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


async def until(condition: Any, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        await asyncio.sleep(0.005)


def test_one_check_per_client_and_identical_credentials_share_it() -> None:
    held = Held()
    auth = BasicAuth(check=held, workers=2)

    async def go() -> list[Verdict]:
        first = asyncio.create_task(auth.verify(FAST, "alice", b"alice-pw", client="10.0.0.1"))
        await until(lambda: held.started == [b"alice-pw"])
        again = asyncio.create_task(auth.verify(FAST, "alice", b"alice-pw", client="10.0.0.9"))
        other = await auth.verify(FAST, "bob", b"guess", client="10.0.0.1")  # the same client
        neighbour = asyncio.create_task(auth.verify(FAST, "bob", b"guess", client="10.0.0.2"))
        await until(lambda: len(held.started) == 2)  # the second worker
        held.release(b"alice-pw")
        held.release(b"guess")
        return [await first, await again, other, await neighbour]

    assert run(go()) == [Verdict.OK, Verdict.OK, Verdict.BUSY, Verdict.WRONG]
    assert held.started == [b"alice-pw", b"guess"]  # the shared one ran once
    assert auth.checks_running == 0 and auth.cached(FAST, "alice", b"alice-pw")


def test_a_free_worker_goes_to_a_client_without_failures_first() -> None:
    held = Held()
    auth = BasicAuth(check=held, workers=1, waiting=8)

    async def go() -> list[Verdict]:
        running = asyncio.create_task(auth.verify(FAST, "bob", b"slow-guess", client="g0",
                                                  priority=1))
        await until(lambda: held.started == [b"slow-guess"])
        guessers = [asyncio.create_task(auth.verify(FAST, "bob", f"guess-{i}".encode(),
                                                    client=f"g{i}", priority=1))
                    for i in (1, 2, 3)]
        await until(lambda: auth.checks_running == 4)
        right = asyncio.create_task(auth.verify(FAST, "carol", b"carol-pw", client="prom",
                                                priority=0))
        await until(lambda: auth.checks_running == 5)
        for password in (b"slow-guess", b"carol-pw", b"guess-1", b"guess-2", b"guess-3"):
            held.release(password)
        return [await right, await running, *[await g for g in guessers]]

    assert run(go()) == [Verdict.OK] + [Verdict.WRONG] * 4
    assert held.started == [b"slow-guess", b"carol-pw", b"guess-1", b"guess-2", b"guess-3"]


def test_a_full_wait_list_refuses_or_gives_way_to_a_better_priority() -> None:
    held = Held()
    auth = BasicAuth(check=held, workers=1, waiting=1)

    async def go() -> list[Verdict]:
        running = asyncio.create_task(auth.verify(FAST, "bob", b"a", client="g0", priority=1))
        await until(lambda: held.started == [b"a"])
        queued = asyncio.create_task(auth.verify(FAST, "bob", b"b", client="g1", priority=1))
        await until(lambda: auth.checks_running == 2)
        refused = await auth.verify(FAST, "bob", b"c", client="g2", priority=1)
        right = asyncio.create_task(auth.verify(FAST, "carol", b"carol-pw", client="prom"))
        gave_way = await queued  # its place went to the better priority
        held.release(b"a")
        held.release(b"carol-pw")
        return [await running, gave_way, refused, await right]

    assert run(go()) == [Verdict.WRONG, Verdict.BUSY, Verdict.BUSY, Verdict.OK]
    assert held.started == [b"a", b"carol-pw"]


def test_an_answer_is_due_in_time_and_the_check_goes_on() -> None:
    """LATE within the bound; the check finishes after the answer, its verdict counted then and
    its success cached for the next request."""
    held = Held()
    auth = BasicAuth(check=held, answer_within=0.3)
    verdicts: list[bool] = []

    async def go() -> tuple[Verdict, float, list[bool], bool]:
        t0 = time.monotonic()
        answer = await auth.verify(FAST, "alice", b"alice-pw", client="c", on_verdict=verdicts.append)
        took = time.monotonic() - t0
        at_answer = list(verdicts)
        held.release(b"alice-pw")
        await until(lambda: verdicts == [True])
        return answer, took, at_answer, auth.cached(FAST, "alice", b"alice-pw")

    answer, took, at_answer, cached = run(go())
    # Answered while the check was still held (no verdict yet), not before the bound.
    assert answer is Verdict.LATE and took > 0.25 and at_answer == [] and cached


@pytest.mark.parametrize(("costs", "most", "dummy"), [
    ((4, 4, 10), 12, 4), ((10, 12, 14), 6, 6), ((4, 5, 6, 7), 12, 5), ((), 12, 10)])
def test_an_unknown_user_costs_the_median_configured_cost_at_most_a_fixed_one(
        costs: tuple[int, ...], most: int, dummy: int) -> None:
    users = {f"u{i}": b"$2b$%02d$" % c + b"x" * 53 for i, c in enumerate(costs)}
    held = Held()
    held.release(b"pw")
    auth = BasicAuth(check=held, dummy_max_cost=most)
    assert run(auth.verify(users, "nobody", b"pw", client="c")) is Verdict.WRONG
    (reference,) = held.references
    assert hashes.cost(reference) == dummy and reference not in users.values()


def test_the_example_password_is_refused_even_before_its_trial() -> None:
    users = {"prometheus": bcrypt.hashpw(hashes.PLACEHOLDER, bcrypt.gensalt(4))}
    with capture_logs() as logs:
        verdict = run(BasicAuth().verify(users, "prometheus", hashes.PLACEHOLDER, client="c"))
    assert verdict is Verdict.WRONG
    assert [e["event"] for e in logs] == ["auth_placeholder_password"]
    assert hashes.PLACEHOLDER.decode() not in repr(logs)


def test_trials_fit_the_budget_and_the_rest_run_in_the_background() -> None:
    trials = hashes.Trials()
    quick = bcrypt.hashpw(b"x", bcrypt.gensalt(4))
    slow = bcrypt.hashpw(b"y", bcrypt.gensalt(12))  # predicted about 0.25 s here
    example = bcrypt.hashpw(hashes.PLACEHOLDER, bcrypt.gensalt(4))
    t0 = time.thread_time()  # CPU time of this thread: what a busy machine does not stretch
    bcrypt.checkpw(b"z", slow)
    one_slow_check = time.thread_time() - t0  # the yardstick
    t0 = time.thread_time()
    trials.try_now([slow, quick, example], budget=0.02)
    assert time.thread_time() - t0 < one_slow_check / 2  # the slow one was not tried now
    assert trials.verdict(quick) == hashes.Trial(False, trials.verdict(quick).seconds)  # type: ignore[union-attr]
    assert trials.verdict(example).placeholder  # type: ignore[union-attr]
    assert trials.verdict(slow) is None
    seen: list[tuple[bytes, hashes.Trial]] = []
    trials.in_background([slow, quick], lambda h, t: seen.append((h, t)))
    # It runs at nice 19: beside busy loops it gets about 1% of a core, and its 0.25 s of CPU
    # take a minute or more. What is tested is that it runs at all, so the wait is long.
    assert trials.wait(600)
    assert [h for h, _ in seen] == [slow] and not seen[0][1].placeholder
    assert seen[0][1].seconds > 0.01


def test_readable_tells_a_hash_bcrypt_cannot_check_at_once() -> None:
    assert hashes.readable(FAST["alice"])
    assert hashes.readable(b"$2y$18$Oba1QfI15NPs6SFGFadnBe228HjLNxmK7MWm8k5zpcwARlb71HNLi")
    assert not hashes.readable(b"$2b$18$" + b"z" * 53)
    t0 = time.thread_time()
    for _ in range(20):
        hashes.readable(b"$2y$18$Oba1QfI15NPs6SFGFadnBe228HjLNxmK7MWm8k5zpcwARlb71HNLi")
    assert time.thread_time() - t0 < 1.0  # 20 checks of a cost-18 hash: no cost-18 check


def test_guessers_share_the_workers_but_one_kept_for_clean_clients() -> None:
    """Two workers: guessers (failures on record) run one at a time, however many they are, and
    a client without failures starts at once beside them."""
    held = Held()
    auth = BasicAuth(check=held, workers=2)

    async def go() -> list[Verdict]:
        guessers = [asyncio.create_task(auth.verify(FAST, "bob", f"g{i}".encode(),
                                                    client=f"g{i}", priority=1))
                    for i in range(3)]
        await until(lambda: auth.checks_running == 3)
        await asyncio.sleep(0.05)
        assert held.started == [b"g0"]  # one worker for all of them
        right = asyncio.create_task(auth.verify(FAST, "alice", b"alice-pw", client="prom"))
        await until(lambda: held.started == [b"g0", b"alice-pw"])  # at once, beside them
        for password in (b"alice-pw", b"g0", b"g1", b"g2"):
            held.release(password)
        return [await right, *[await g for g in guessers]]

    assert run(go()) == [Verdict.OK] + [Verdict.WRONG] * 3
    assert held.started == [b"g0", b"alice-pw", b"g1", b"g2"]


def test_checks_of_clients_with_failures_run_at_a_lower_cpu_priority() -> None:
    """A clean client's check (priority 0) runs at the process's nice level, a guesser's
    (priority 1) LOW_PRIORITY_NICE levels lower: it gets the CPU first on a busy machine."""
    import os

    from exporter.web.basic_auth import LOW_PRIORITY_NICE

    seen: dict[bytes, int] = {}

    def check(password: bytes, hashed: bytes) -> bool:
        seen[password] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return check_password(password, hashed)

    async def main() -> None:
        auth = BasicAuth(check=check)
        assert await auth.verify(FAST, "alice", b"alice-pw", client="p", priority=0) \
            is Verdict.OK
        assert await auth.verify(FAST, "bob", b"guess", client="g", priority=1) is Verdict.WRONG

    asyncio.run(main())
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen == {b"alice-pw": base, b"guess": min(base + LOW_PRIORITY_NICE, 19)}
