"""The phase book bounded by its writer, below its reader's limit; its GET answer made once per
change; a file that cannot be read never shown as an empty book."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.durable import MAX_STATE_BYTES, read_regular
from exporter.phases.book import (
    MAX_BOOK_BYTES,
    STATE_FILE,
    Phase,
    PhaseBook,
    PhaseStore,
    PhaseUnavailable,
    decode,
    encode,
    phase_json,
)
from exporter.phases.capture import Capture


def _capture(at: float, pad: int) -> Capture:
    # identity values stand in for whatever makes a capture large (miss keys, pins, ranks)
    return Capture(at=at, generation="g-1", identity={"package": "p" * pad},
                   counters={"lookups.total": int(at)})


class Captures:
    def __init__(self) -> None:
        self.at, self.pad = 0.0, 10

    async def __call__(self) -> Capture:
        self.at += 1
        return _capture(self.at, self.pad)


def _book(tmp: Path, max_bytes: int, max_kept: int = 512) -> tuple[PhaseBook, Captures]:
    captures = Captures()
    book = PhaseBook(PhaseStore(tmp), captures, max_bytes=max_bytes, max_kept=max_kept)
    book.load()
    return book, captures


def test_the_writer_bound_is_below_the_reader_limit() -> None:
    assert MAX_BOOK_BYTES < MAX_STATE_BYTES


# (begin | end, phase number, capture padding)
ACTIONS = st.lists(st.tuples(st.sampled_from(["begin", "end"]), st.integers(0, 12),
                             st.integers(0, 900)), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(actions=ACTIONS, budget=st.integers(2_000, 12_000))
def test_any_sequence_of_edges_keeps_the_file_readable_and_bounded(
        tmp_path_factory: pytest.TempPathFactory, actions: list[tuple[str, int, int]],
        budget: int) -> None:
    tmp = tmp_path_factory.mktemp("book")
    book, captures = _book(tmp, budget)
    ended_order: list[str] = []

    async def run() -> None:
        for action, n, pad in actions:
            captures.pad = pad
            name = f"p{n}"
            try:
                if action == "begin":
                    await book.begin(name, None)
                else:
                    await book.end(name, None)
                    ended_order.append(name)
            except Exception as exc:  # conflicts, and open phases alone over the budget
                assert type(exc).__name__ in ("PhaseConflict", "PhaseUnavailable")
            data = read_regular(tmp / STATE_FILE) or encode(())
            assert len(data) <= budget
            assert decode(data) == book.phases  # the file is the book
            assert data == encode(book.phases)  # joined bytes == the whole book encoded
            shown = json.loads(book.answer())
            assert shown["phases"] == [phase_json(p) for p in book.phases]

    asyncio.run(run())
    # What was dropped is the oldest ended phases: the ended phases kept are the latest ended.
    kept_ended = [p.name for p in book.phases if not p.open]
    assert set(kept_ended) <= set(ended_order)
    # A restart reads back exactly the book.
    again, _ = _book(tmp, budget)
    assert again.phases == book.phases


def test_large_phases_past_the_bound_stay_under_it_and_survive_a_restart(
        tmp_path: Path) -> None:
    """About 30 KB a phase, as a within-defaults engine's captures are: the old book passed
    the reader's 8 MiB at about 370 phases, and a restart then lost every phase. The book
    starts near its bound (a file of 190 such phases) and takes 40 more edges past it."""
    earlier = tuple(Phase(f"e/{i}", _capture(i, 15_000), _capture(i + 0.5, 15_000))
                    for i in range(190))
    (tmp_path / STATE_FILE).write_bytes(encode(earlier))
    book, captures = _book(tmp_path, MAX_BOOK_BYTES)
    assert book.phases == earlier
    captures.pad, captures.at = 15_000, 1_000.0

    async def run() -> None:
        for i in range(20):
            await book.begin(f"r/{i}", None)
            await book.end(f"r/{i}", None)

    asyncio.run(run())
    assert os.path.getsize(tmp_path / STATE_FILE) <= MAX_BOOK_BYTES
    names = [p.name for p in book.phases]
    assert names[-20:] == [f"r/{i}" for i in range(20)]  # the newest kept
    assert "e/0" not in names and names[0] == f"e/{190 + 20 - len(names)}"  # the oldest dropped
    again, _ = _book(tmp_path, MAX_BOOK_BYTES)
    assert again.unreadable is None and again.phases == book.phases


def test_a_legacy_file_over_the_bound_is_read_and_trimmed(tmp_path: Path) -> None:
    phases = tuple(Phase(f"old/{i}", _capture(i, 20_000), _capture(i + 0.5, 20_000))
                   for i in range(300))
    (tmp_path / STATE_FILE).write_bytes(encode(phases))  # about 12 MB: over the reader's 8 MiB
    assert os.path.getsize(tmp_path / STATE_FILE) > MAX_STATE_BYTES
    book, _ = _book(tmp_path, MAX_BOOK_BYTES)
    assert book.unreadable is None
    assert book.phases and book.phases == phases[-len(book.phases):]  # the newest kept

    async def run() -> None:
        await book.begin("new", None)

    asyncio.run(run())  # the first write brings the file under the bound
    assert os.path.getsize(tmp_path / STATE_FILE) <= MAX_BOOK_BYTES


def test_an_undecodable_file_is_set_aside_and_the_answer_says_so(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_bytes(b"{not json")
    book, _ = _book(tmp_path, MAX_BOOK_BYTES)
    shown = json.loads(book.answer())
    assert shown["phases"] == []
    aside = shown["set_aside"]
    assert aside["path"] and Path(aside["path"]).read_bytes() == b"{not json"
    assert "not JSON" in aside["reason"]


def test_an_unreadable_file_refuses_changes_and_is_not_written_over(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / STATE_FILE)  # not a regular file: never read, never replaced
    book, _ = _book(tmp_path, MAX_BOOK_BYTES)
    assert book.unreadable is not None

    async def run() -> None:
        with pytest.raises(PhaseUnavailable):
            await book.begin("x", None)

    asyncio.run(run())
    assert (tmp_path / STATE_FILE).is_fifo()


def test_the_answer_is_made_at_a_change_not_at_a_request(tmp_path: Path) -> None:
    book, _ = _book(tmp_path, MAX_BOOK_BYTES)
    asyncio.run(book.begin("a", None))
    first = book.answer()
    assert book.answer() is first  # the same bytes, not made again
    asyncio.run(book.end("a", None))
    assert book.answer() is not first
    assert json.loads(book.answer())["phases"][0]["state"] == "ended"
