"""The durable restore state file, damaged: a file that is not a state file is moved aside with
a clear error, a value this release does not understand is reported and costs at most a window
without a usable start, unknown fields are kept and written back, and the sidecar keeps working."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from exporter.restore import store
from exporter.restore.store import STATE_FILE, StateFileError, StateStore
from exporter.restore.window import RestoreState, restarted
from tests.exporter.restore.restore_helpers import (
    make_sidecar,
    open_window_state,
)


def _good() -> dict:
    return json.loads(store.encode(open_window_state()))


def _with(path: list, value: object) -> bytes:
    doc = _good()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(doc).encode()


# Not a state file at all: moved aside.
CORRUPT = {
    "garbage": b"\x00\xff\xfe garbage \x80",
    "empty": b"",
    "truncated": store.encode(open_window_state())[:-9],
    "null": b"null",
    "list": b"[1, 2]",
    "format_0": _with(["format"], 0),
    "format_string": _with(["format"], "1"),
    "no_format": json.dumps({"state": {}}).encode(),
    "state_list": _with(["state"], []),
    "state_string": _with(["state"], "serving"),
    "deep_nesting": b"[" * 100_000 + b"]" * 100_000,
}
# A value this release does not understand (a newer release's, or damage): read with what is
# understood, reported; only a window without a usable start is lost.
NO_START = ("start_string", "start_bool", "start_nan", "window_list")
UNKNOWN = {
    "format_2": _with(["format"], 2),
    "start_string": _with(["state", "window", "start"], "soon"),
    "start_bool": _with(["state", "window", "start"], True),
    "start_nan": store.encode(open_window_state()).replace(b'"start": 1764389525.9876542',
                                                          b'"start": NaN'),
    "cause_bogus": _with(["state", "window", "cause"], "bogus"),
    "phase_bogus": _with(["state", "phase"], "exploded"),
    "window_list": _with(["state", "window"], [1]),
    "incumbent_string": _with(["state", "window", "incumbent"], "g1"),
    "incumbent_generation_int": _with(["state", "window", "incumbent", "generation"], 7),
    "preflight_list": _with(["state", "window", "preflight"], ["direct"]),
    "checks_string": _with(["state", "checks"], "all good"),
    "checks_value_string": _with(["state", "checks"], {"image": "false"}),
    "event_ids_int": _with(["state", "event_ids"], 5),
    "last_inflight_string": _with(["state", "window", "last_inflight"], "three"),
    "last_window_outcome": _with(["state", "last_window"],
                                 {"start": 1, "end": 2, "cause": "drain", "outcome": "meh"}),
    # fields added after 0.1.0
    "lost_string": _with(["state", "window", "lost"], "2"),
    "lost_negative": _with(["state", "window", "lost"], -1),
    "reference_int": _with(["state", "window", "reference"], 1),
    "start_exact_string": _with(["state", "window", "start_exact"], "yes"),
    "last_unrestored_string": _with(["state", "window", "last_unrestored"], "now"),
    "unreachable_int": _with(["state", "window", "unreachable"], 1),
    "package_int": _with(["state", "window", "incumbent", "package"], 2),
    "started_at_string": _with(["state", "window", "incumbent", "started_at"], "noon"),
    "judged_outcome": _with(["state", "judged"],
                            {"start": None, "end": 2, "cause": None, "outcome": "maybe"}),
    "judged_start_string": _with(["state", "judged"],
                                 {"start": "x", "end": 2, "cause": None, "outcome": "late"}),
    "unplanned_negative": _with(["state", "unplanned_restarts"], -3),
    "state_reference_list": _with(["state", "reference"], ["g1"]),
}


def test_corrupt_cases_really_differ_from_a_good_file() -> None:
    assert b"NaN" in UNKNOWN["start_nan"]
    for name, data in UNKNOWN.items():
        assert data != json.dumps(_good()).encode(), name
    assert store.decode(json.dumps(_good()).encode()) == restarted(open_window_state())


@pytest.mark.parametrize("name", list(CORRUPT))
def test_corrupt_file_is_moved_aside_with_a_clear_error(tmp_path: Path, name: str) -> None:
    s = StateStore(tmp_path)
    s.path.write_bytes(CORRUPT[name])
    with pytest.raises(StateFileError) as info:
        s.load()
    assert "corrupt state file" in str(info.value)
    assert str(s.path) in str(info.value)
    moved = info.value.moved_to
    assert moved is not None and moved.parent == tmp_path
    assert moved.read_bytes() == CORRUPT[name]  # kept for on-call, byte for byte
    assert not s.path.exists()
    assert s.load() is None  # the next start begins clean


@pytest.mark.parametrize("name", list(UNKNOWN))
def test_an_unknown_value_is_reported_and_never_costs_the_open_window(
        tmp_path: Path, name: str) -> None:
    s = StateStore(tmp_path)
    s.path.write_bytes(UNKNOWN[name])
    decoded = s.load_report()
    assert decoded is not None and decoded.problems, name
    assert s.path.read_bytes() == UNKNOWN[name]  # not moved, not changed
    want = restarted(open_window_state())
    if name in NO_START:
        assert decoded.state.window is None
        assert any("window" in p for p in decoded.problems)
    else:
        window = decoded.state.window
        assert window is not None and want.window is not None
        assert window.start == want.window.start  # the exact start
        assert window.start_exact == want.window.start_exact
        if not name.startswith("incumbent"):
            assert window.incumbent == want.window.incumbent
    if name not in ("event_ids_int",):
        assert decoded.state.event_ids == want.event_ids


def test_unknown_fields_are_kept_and_written_back(tmp_path: Path) -> None:
    doc = _good()
    doc["state"]["planned_by"] = {"team": "fleet"}
    doc["state"]["window"]["quorum"] = 3
    s = StateStore(tmp_path)
    s.path.write_text(json.dumps(doc))
    decoded = s.load_report()
    assert decoded is not None
    assert sorted(decoded.problems) == ["planned_by: unknown field, kept",
                                        "window.quorum: unknown field, kept"]
    s.save(decoded.state)
    back = json.loads(s.path.read_bytes())
    assert back["state"]["planned_by"] == {"team": "fleet"}
    assert back["state"]["window"]["quorum"] == 3
    assert back["state"]["window"]["start"] == doc["state"]["window"]["start"]


def test_keeper_counts_corrupt_file_and_sidecar_keeps_working(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_bytes(b"{not json")
    sidecar = make_sidecar(tmp_path)
    loop = sidecar.loop
    with capture_logs() as logs:
        loop.load_state()
    assert loop.view.restore.corrupt_files == 1
    assert loop.view.restore.state == RestoreState()
    err = [e for e in logs if e["event"] == "restore_state_unusable"]
    assert err and err[0]["log_level"] == "error" and ".corrupt-" in err[0]["moved_to"]
    assert sidecar.registry.get_sample_value("helios_restore_state_corrupt_total") == 1

    async def cycles() -> None:
        await loop.cycle()
        await loop.keeper.apply_event("ev-1", "drain_started")
        await sidecar.client.aclose()

    asyncio.run(cycles())
    loop.close()
    assert loop.view.restore.write_errors == 0
    saved = StateStore(tmp_path).load()
    assert saved is not None and saved.window is not None and saved.event_ids == ("ev-1",)
    assert sidecar.registry.get_sample_value("helios_restore_window_open") == 1
    assert sidecar.status()["restore"]["window_open"] is True
