"""2xx means durable: an event is acknowledged only once it is on disk, over random sequences of
events and disk faults; a burst of events cannot starve the poll cycle; an id names one event;
the event names have one home."""

from __future__ import annotations

import asyncio
import errno
import time
from pathlib import Path
from typing import get_args

from hypothesis import given
from hypothesis import strategies as st

from exporter.labels import ErrorReason
from exporter.restore.answers import ANSWERS
from exporter.restore.events import RestoreEventIn
from exporter.restore.keeper import MAX_WAITING_EVENTS, RestoreKeeper
from exporter.restore.model import EVENT_KINDS, EventKind
from exporter.restore.store import StateStore
from exporter.restore.window import Event, RestoreState, refusal, restarted, step
from tests.exporter.restore.restore_helpers import BOUNDS, snap
from tests.exporter.restore.test_properties import SETTINGS


class Disk(StateStore):
    """A real store on a disk that can be full (a write raises ENOSPC, as the kernel's would)
    or slow (each write takes `delay` seconds, in the keeper's worker thread)."""

    def __init__(self, directory: Path, delay: float = 0.0) -> None:
        super().__init__(directory)
        self.full = False
        self.delay = delay

    def save(self, state: RestoreState) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        time.sleep(self.delay)
        super().save(state)


def on_disk(store: StateStore) -> RestoreState:
    saved = StateStore(store.directory).load()
    return saved if saved is not None else RestoreState()


steps = st.lists(st.tuples(st.sampled_from(EVENT_KINDS), st.sampled_from("abcdef"),
                           st.booleans(), st.booleans()), min_size=1, max_size=30)


@SETTINGS
@given(steps)
def test_an_event_is_acknowledged_only_once_on_disk(tmp_path_factory: object,
                                                    seq: list[tuple[str, str, bool, bool]]) -> None:
    directory = tmp_path_factory.mktemp("disk")  # type: ignore[attr-defined]
    store = Disk(directory)
    polls = iter(range(1_000_000, 2_000_000, 2)).__next__
    ticks: list[float] = [1_000_001.0]

    def clock() -> float:  # the keeper's: an event's time, one reading per event applied
        ticks[0] += 2.0
        return ticks[0]

    keeper = RestoreKeeper(store, BOUNDS, clock=clock)
    model = RestoreState()  # the acknowledged events alone, applied by the pure state machine

    async def go() -> None:
        nonlocal model
        await keeper.observe(999_999.0, snap())
        model = keeper.view().state
        for kind, id_, full, answers in seq:
            store.full = full
            if not answers:  # a poll of a vanished engine between events
                await keeper.observe(float(polls()), None, ErrorReason.CONNECT)
                model = keeper.view().state
                continue
            before = keeper.view().state
            known = before.event_kinds.get(id_) if id_ in before.event_ids else None
            out = await keeper.apply_event(id_, kind)  # type: ignore[arg-type]
            after = keeper.view().state
            would = id_ not in before.event_ids and refusal(before, kind) is None
            if id_ in before.event_ids:
                assert (out.refused is not None) == (known not in (None, kind))
                assert out.duplicate == (known in (None, kind)) and after == before
            elif not would:
                assert out.refused is not None and after == before
            elif full:
                # Not on disk: answered 503, nothing changed, the id not used up.
                assert out.unavailable is not None and after == before
                assert id_ not in after.event_ids
            else:
                assert out.unavailable is None and out.refused is None and not out.duplicate
                model = step(model, Event(ticks[0], id_, kind), BOUNDS)  # type: ignore[arg-type]
                assert after == model
                assert on_disk(store) == restarted(after)  # acknowledged: on disk, all of it

    asyncio.run(go())


def test_a_burst_of_events_waits_behind_a_bounded_queue(tmp_path: Path) -> None:
    """20 events at once on a disk whose writes take 50 ms: the poll cycle that comes after them
    waits for at most MAX_WAITING_EVENTS writes, the one in flight and its own (counted, not
    timed: the count does not depend on the machine's load); the events beyond are answered 503
    and apply when retried."""
    store = Disk(tmp_path, delay=0.05)
    keeper = RestoreKeeper(store, BOUNDS)

    async def go() -> tuple[int, list[str | None]]:
        await keeper.observe(time.time(), snap())
        kinds: list[EventKind] = ["drain_started", "abort"]
        burst = [asyncio.create_task(keeper.apply_event(f"b-{i}", kinds[i % 2]))
                 for i in range(20)]
        await asyncio.sleep(0)  # every event of the burst has asked for the lock
        before = store.writes
        await keeper.observe(time.time(), snap())
        waited = store.writes - before
        outcomes = await asyncio.gather(*burst)
        return waited, [o.unavailable for o in outcomes]

    waited, unavailable = asyncio.run(go())
    assert 1 <= waited <= MAX_WAITING_EVENTS + 2, waited
    assert sum(u is not None for u in unavailable) == 20 - 1 - MAX_WAITING_EVENTS
    assert keeper.view().events[("drain_started", "unavailable")] > 0

    async def retry() -> tuple[str | None, str | None]:
        out = await keeper.apply_event("b-5", "abort")  # answered 503 in the burst
        return out.unavailable, out.refused

    assert asyncio.run(retry()) == (None, None)  # it applies when sent again


def test_an_id_names_one_event_also_after_a_restart(tmp_path: Path) -> None:
    async def go(keeper: RestoreKeeper) -> list[tuple[bool, str | None]]:
        await keeper.observe(time.time(), snap())
        out = []
        for id_, kind in (("x", "drain_started"), ("x", "abort"), ("x", "drain_started")):
            o = await keeper.apply_event(id_, kind)  # type: ignore[arg-type]
            out.append((o.duplicate, o.refused))
        return out

    first = asyncio.run(go(RestoreKeeper(StateStore(tmp_path), BOUNDS)))
    assert first[0] == (False, None) and first[2] == (True, None)
    assert first[1][0] is False and first[1][1] is not None and "drain_started" in first[1][1]
    again = RestoreKeeper(StateStore(tmp_path), BOUNDS)
    again.load()

    async def replay() -> str | None:
        return (await again.apply_event("x", "window_closed")).refused

    refused = asyncio.run(replay())
    assert refused is not None and "drain_started" in refused


def test_the_event_names_have_one_home() -> None:
    assert get_args(EventKind) == EVENT_KINDS
    schema = RestoreEventIn.model_json_schema()
    assert tuple(schema["properties"]["event"]["enum"]) == EVENT_KINDS
    assert {a.event for a in ANSWERS} == set(EVENT_KINDS)
