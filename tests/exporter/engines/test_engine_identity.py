"""The generation of an engine that states none (exporter/engines/identity.py)."""

from __future__ import annotations

from exporter.engines.exposition import parse
from exporter.engines.identity import advance
from tests import engine_expositions


def test_the_earliest_counter_creation_names_the_incarnation() -> None:
    text = engine_expositions.sglang()
    exp = parse(text, ())
    assert exp.created_min is not None
    first = advance(None, "sglang", exp, {"host_stores": 5}, now=100.0)
    later = advance(first, "sglang", parse(text, ()), {"host_stores": 9}, now=200.0)
    assert first.evidence == "counter_created" and first.started_at == exp.created_min
    assert later.generation == first.generation
    moved = "\n".join(  # a restart a minute later: every series created again
        f"{line.rsplit(' ', 1)[0]} {float(line.rsplit(' ', 1)[1]) + 60}"
        if "_created" in line and not line.startswith("#") else line
        for line in text.splitlines())
    again = advance(later, "sglang", parse(moved, ()), {"host_stores": 1}, now=300.0)
    assert again.generation != first.generation


def test_process_start_time_comes_first() -> None:
    text = engine_expositions.sglang() + "process_start_time_seconds 1.7e9\n"
    ident = advance(None, "sglang", parse(text, ()), {}, now=5.0)
    assert ident.evidence == "process_start_time" and ident.started_at == 1.7e9


def test_without_a_start_a_counter_reset_starts_a_generation() -> None:
    exp = parse(engine_expositions.sglang(created=False), ())
    assert exp.created_min is None and exp.start_time is None
    first = advance(None, "sglang", exp, {"host_stores": 50, "lookups": 4}, now=10.0)
    same = advance(first, "sglang", exp, {"host_stores": 60, "lookups": 4}, now=20.0)
    reset = advance(same, "sglang", exp, {"host_stores": 3, "lookups": 5}, now=30.0)
    assert first.evidence == "counter_reset" and first.started_at is None
    assert same.generation == first.generation
    assert reset.generation != first.generation
    assert advance(reset, "sglang", exp, {"host_stores": 4}, now=40.0).generation == \
        reset.generation
