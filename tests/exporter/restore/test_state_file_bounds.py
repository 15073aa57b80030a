"""What the sidecar writes, it can read back: numbers JSON allows but this release cannot carry
(NaN, Infinity, 1e999, 5000-digit integers) in fields it does not know are dropped and reported,
over every path that reads the file (the store, the keeper at start and in its cycles); every
file the writer makes stays under the reader's limit; an encoding error is a write error."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.durable import MAX_STATE_BYTES
from exporter.restore.codec import Extra
from exporter.restore.keeper import RestoreKeeper
from exporter.restore.model import MAX_EVENT_IDS
from exporter.restore.store import STATE_FILE, StateStore, StateWriteError, encode
from exporter.restore.window import Event, RestoreState, step
from tests.exporter.restore.restore_helpers import BOUNDS, event, final, poll, snap
from tests.exporter.restore.test_properties import SETTINGS

UNUSABLE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "9" * 5000, "-" + "7" * 4400,
            "[1, NaN]", '{"deep": [{"x": Infinity}]}']
names = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12).map(lambda n: "x_" + n)


def open_window() -> RestoreState:
    return final([poll(100.0, inflight=2), event(110.0, "drain_started", "d-1")])


def with_unknown(state: RestoreState, where: str, name: str, raw: str) -> bytes:
    """The file of `state` with an unknown field `name` holding the JSON text `raw` (which
    json.dumps would not write) in the state or its window."""
    doc = json.loads(encode(state))
    target = doc["state"] if where == "state" else doc["state"]["window"]
    target[name] = "@PLACEHOLDER@"
    return json.dumps(doc).replace('"@PLACEHOLDER@"', raw).encode()


@SETTINGS
@given(st.sampled_from(["state", "window"]), names, st.sampled_from(UNUSABLE))
def test_an_unusable_number_in_an_unknown_field_is_dropped_never_a_failed_write(
        tmp_path_factory: pytest.TempPathFactory, where: str, name: str, raw: str) -> None:
    directory = tmp_path_factory.mktemp("state")
    state = open_window()
    (directory / STATE_FILE).write_bytes(with_unknown(state, where, name, raw))
    # The store: loads with the window, the field reported as a problem of that field.
    store = StateStore(directory)
    decoded = store.load_report()
    assert decoded is not None and decoded.state.window is not None
    prefix = "" if where == "state" else "window."
    assert any(p.startswith(f"{prefix}{name}:") and "dropped" in p for p in decoded.problems)
    assert not list(directory.glob("*.corrupt-*"))  # never moved aside
    # The keeper: loads it and its cycles write (the encoder would have refused the value).
    keeper = RestoreKeeper(StateStore(directory), BOUNDS)
    keeper.load()

    async def cycle() -> None:
        await keeper.observe(200.0, snap(admission="draining", inflight=1))

    asyncio.run(cycle())
    view = keeper.view()
    assert view.write_errors == 0 and view.state.window is not None
    assert view.state.window.start == 110.0
    again = StateStore(directory).load_report()
    assert again is not None and not any(name in p for p in again.problems)


@pytest.mark.parametrize("raw", UNUSABLE)
def test_an_unusable_number_in_a_known_field_is_a_problem_of_that_field(
        tmp_path: Path, raw: str) -> None:
    doc = json.loads(encode(open_window()))
    doc["state"]["window"]["last_unrestored"] = "@P@"
    doc["state"]["unplanned_restarts"] = "@P@"
    (tmp_path / STATE_FILE).write_text(json.dumps(doc).replace('"@P@"', raw))
    decoded = StateStore(tmp_path).load_report()
    assert decoded is not None and decoded.state.window is not None
    assert decoded.state.unplanned_restarts == 0
    assert any(p.startswith("window.last_unrestored") for p in decoded.problems)
    assert any(p.startswith("unplanned_restarts") for p in decoded.problems)


def test_the_largest_state_the_writer_makes_is_under_the_readers_limit(tmp_path: Path) -> None:
    """Every id at its longest (64 characters, each one escaped to six bytes), both the ids and
    their kinds, and a newer release's unknown field that fills the reader's limit: the writer
    drops the unknown fields (reported) and the file reads back."""
    state = open_window()
    for i in range(MAX_EVENT_IDS + 5):
        state = step(state, Event(200.0 + i, f"{i:05d}" + "\u2603" * 59,
                                  "drain_started" if state.window is None else "abort"), BOUNDS)
    assert len(state.event_ids) == MAX_EVENT_IDS
    own = len(encode(state))
    assert own < MAX_STATE_BYTES // 4, own
    store = StateStore(tmp_path)
    store.extra = Extra(state={"x_newer": "y" * (MAX_STATE_BYTES - own // 2)})
    store.save(state)
    assert (tmp_path / STATE_FILE).stat().st_size <= MAX_STATE_BYTES
    assert any("unknown fields: dropped" in p for p in store.problems)
    assert StateStore(tmp_path).load() is not None


def test_an_encoding_error_is_a_write_error_never_a_failed_cycle(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.extra = Extra(state={"x_newer": {1 + 2j}})  # no JSON for it
    with pytest.raises(StateWriteError):
        store.save(open_window())
    keeper = RestoreKeeper(store, BOUNDS)

    async def cycles() -> None:
        await keeper.observe(time.time(), snap())
        await keeper.observe(time.time() + 1, snap(generation="g2"))

    asyncio.run(cycles())
    view = keeper.view()
    assert view.write_errors >= 1 and "not encodable" in view.last_write_error
