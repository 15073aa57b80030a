"""`simulate --geometry`: the named tiers, the hybrid-tp2 one tied to the layout file it stands for,
and the options that override a named tier."""

from __future__ import annotations

import argparse
from fractions import Fraction

import pytest

from exporter import layout
from simulator import cli
from simulator.engine import SimulatedEngine
from simulator.slabs import GEOMETRIES, HYBRID_TP2_ROW_RECORD_BYTES
from tests.conftest import FIXTURES


def parse(*argv: str) -> argparse.Namespace:
    return cli.parser(environ={}).parse_args(["--listen", "127.0.0.1:1", *argv])


def test_hybrid_tp2_serves_the_records_its_layout_derives() -> None:
    recs, part = layout.derive(layout.load(FIXTURES / "layouts" / "hybrid-tp2.json"), 32 << 30,
                               Fraction(1, 4))
    assert recs.row_record_bytes == HYBRID_TP2_ROW_RECORD_BYTES
    tier = cli._engine_config(parse("--geometry", "hybrid-tp2", "--scenario", "idle")).geometry
    assert (tier.row_record_bytes, tier.page_record_bytes) == (recs.row_record_bytes,
                                                               recs.page_record_bytes)
    assert (tier.row_capacity, tier.page_capacity) == (part.rows, part.pages) == (52, 24655)
    assert tier.budget_bytes == part.budget_bytes


def test_hybrid_tp2_snapshot() -> None:
    engine = SimulatedEngine(cli._engine_config(parse("--geometry", "hybrid-tp2")), seed=1)
    offload = engine.snapshot()["offload"]
    assert offload["slabs"] == {
        "row": {"capacity": 52, "free": 52, "record_bytes": 163586048},
        "page": {"capacity": 24655, "free": 24655, "record_bytes": 1048576}}
    assert offload["budget_bytes"] == 32 << 30
    assert len(engine.snapshot()["ranks"]) == 2


@pytest.mark.parametrize(("scenario", "stores"), [("idle", 3), ("reverse-replay", 3),
                                                  ("steady", 3), ("demo", 3)])
def test_hybrid_tp2_stores_three_per_request_in_every_scenario(scenario: str, stores: int) -> None:
    assert cli._engine_config(parse("--geometry", "hybrid-tp2", "--scenario",
                                    scenario)).stores_per_request == stores


@pytest.mark.parametrize("environ", [False, True])
def test_the_former_name_seed_001_is_still_accepted(environ: bool) -> None:
    """`--geometry seed-001` (the name before hybrid-tp2), by flag or by variable, serves the
    hybrid-tp2 tier and says so; --help shows only the current names."""
    if environ:
        args = cli.parser(environ={"HELIOS_EXPORTER_GEOMETRY": "seed-001"}).parse_args(
            ["--listen", "127.0.0.1:1"])
    else:
        args = parse("--geometry", "seed-001")
    assert args.geometry == "hybrid-tp2"
    assert cli._engine_config(args) == cli._engine_config(parse("--geometry", "hybrid-tp2"))
    assert "seed-001" not in cli.parser(environ={}).format_help()
    with pytest.raises(SystemExit):
        parse("--geometry", "seed-002")


def test_generic_keeps_the_scenario_stores() -> None:
    assert GEOMETRIES["generic"].stores_per_request is None
    assert cli._engine_config(parse("--scenario", "idle")).stores_per_request == 12
    assert cli._engine_config(parse("--scenario", "steady")).stores_per_request == 3


def test_options_override_the_named_geometry() -> None:
    config = cli._engine_config(parse("--geometry", "hybrid-tp2", "--row-fraction", "0.3125",
                                      "--stores-per-request", "12"))
    assert config.stores_per_request == 12
    assert config.geometry.row_record_bytes == HYBRID_TP2_ROW_RECORD_BYTES
    assert config.geometry.row_capacity == 65  # 10 GiB of 163586048 B rows
    generic = cli._engine_config(parse("--row-record-bytes", str(8 << 20))).geometry
    assert (generic.row_capacity, generic.page_record_bytes) == (1024, 1 << 20)


def test_an_unknown_geometry_is_refused() -> None:
    with pytest.raises(SystemExit):
        parse("--geometry", "production")
