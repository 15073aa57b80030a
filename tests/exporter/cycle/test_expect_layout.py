"""`serve --expect-layout FILE`: the snapshot's record sizes against the layout's, as the rule
`record_bytes_match_layout` of `helios_offload_geometry_consistent`, with expected and found on
/status and the status page; a layout that does not derive is a configuration error."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter import config as cfg
from exporter import layout as lay
from exporter.cycle import geometry
from exporter.oncall.html import page
from exporter.snapshot.parse import snapshot_from_obj
from tests.conftest import FIXTURES
from tests.exporter.oncall.test_page import Page
from tests.helpers import StubEngine, contract_example, make_sidecar

SEED = FIXTURES / "layouts" / "hybrid-tp2.json"
RECORDS = lay.records(lay.load(SEED))


def hybrid_tp2_snapshot() -> dict[str, Any]:
    """The contract example with the slabs `simulate --geometry hybrid-tp2` reports."""
    obj = contract_example()
    obj["offload"]["slabs"] = {"row": {"capacity": 52, "free": 0, "record_bytes": 163586048},
                               "page": {"capacity": 24655, "free": 23823,
                                        "record_bytes": 1048576}}
    obj["offload"]["resident"] = {"records": 52, "bytes": 9378889728}
    return obj


def checked(obj: dict[str, Any]) -> geometry.Geometry:
    g = geometry.check(snapshot_from_obj(obj).offload, RECORDS)
    assert g is not None
    return g


def test_matching_records_hold() -> None:
    g = checked(hybrid_tp2_snapshot())
    assert g.consistent
    rule = g.rules[-1]
    assert (rule.rule, rule.ok, rule.value, rule.limit) == ("record_bytes_match_layout", True, 0, 0)
    assert rule.detail == ("row 163586048 = 163586048, page 1048576 = 1048576 (snapshot "
                           "record_bytes vs layout hybrid-tp2)")
    assert (rule.expected, rule.found) == ({"row": 163586048, "page": 1048576},) * 2


def test_other_records_fail_with_their_own_rule() -> None:
    g = checked(contract_example())  # 16 MiB rows, 1 MiB pages: the generic tier
    assert not g.consistent
    assert [r.rule for r in g.failed] == ["record_bytes_match_layout"]  # the arithmetic holds
    (rule,) = g.failed
    assert (rule.value, rule.layout) == (1, "hybrid-tp2")
    assert rule.expected == {"row": 163586048, "page": 1048576}
    assert rule.found == {"row": 16777216, "page": 1048576}
    assert rule.detail == ("row 16777216 != 163586048, page 1048576 = 1048576 (snapshot "
                           "record_bytes vs layout hybrid-tp2)")


def test_only_the_slabs_present_are_compared() -> None:
    obj = hybrid_tp2_snapshot()
    del obj["offload"]["slabs"]["page"]
    rule = checked(obj).rules[-1]
    assert rule.ok and rule.expected == {"row": 163586048}
    obj["offload"]["slabs"] = {}
    assert all(r.rule != "record_bytes_match_layout"
               for r in (geometry.check(snapshot_from_obj(obj).offload, RECORDS) or
                         geometry.Geometry(())).rules)


def test_without_a_layout_nothing_changes() -> None:
    g = geometry.check(snapshot_from_obj(contract_example()).offload)
    assert g is not None and g.consistent
    assert "record_bytes_match_layout" not in [r.rule for r in g.rules]


def poll(snapshot: dict[str, Any], tmp_path: Path, **config: Any) -> tuple[str, dict[str, Any]]:
    sidecar = make_sidecar(StubEngine(snapshot), tmp_path, **config)

    async def run() -> None:
        await sidecar.loop.cycle()
        await sidecar.client.aclose()

    asyncio.run(run())
    sidecar.close()
    return sidecar.cache.render(False).decode(), sidecar.status()


def consistent(text: str) -> float | None:
    for fam in text_string_to_metric_families(text):
        if fam.name == "helios_offload_geometry_consistent":
            return float(fam.samples[0].value)
    return None


def test_the_sidecar_against_an_engine_with_other_records(tmp_path: Path) -> None:
    text, status = poll(contract_example(), tmp_path, expect_layout=SEED)
    assert consistent(text) == 0.0
    geo = status["offload_geometry"]
    assert geo["failed"] == ["record_bytes_match_layout"]
    rule = geo["rules"][-1]
    assert rule == {"rule": "record_bytes_match_layout", "ok": False, "value": 1, "limit": 0,
                    "detail": "row 16777216 != 163586048, page 1048576 = 1048576 (snapshot "
                              "record_bytes vs layout hybrid-tp2)",
                    "layout": "hybrid-tp2", "expected": {"row": 163586048, "page": 1048576},
                    "found": {"row": 16777216, "page": 1048576}}
    # the arithmetic rules keep their /status shape
    assert set(geo["rules"][0]) == {"rule", "ok", "value", "limit", "detail"}
    shown = Page(page(status, 0.0)).text
    # the geometry table, with the expected and found records beside the arithmetic
    assert ("record_bytes_match_layout FAILED row 163,586,048 B, page 1,048,576 B by layout "
            "hybrid-tp2 row 16,777,216 B, page 1,048,576 B row 16777216 != 163586048") in shown
    assert ("The engine's offload records are not those of the pinned model layout: compare "
            "expected and found under Pins and offload geometry") in shown
    assert "arithmetic does not hold" not in shown
    # and the summary at the top
    assert ("FAILED offload geometry record_bytes_match_layout expected row 163,586,048 B, page "
            "1,048,576 B by layout hybrid-tp2 found row 16,777,216 B") in shown


def test_the_sidecar_against_an_engine_with_the_layouts_records(tmp_path: Path) -> None:
    text, status = poll(hybrid_tp2_snapshot(), tmp_path, expect_layout=SEED)
    assert consistent(text) == 1.0
    assert status["offload_geometry"]["failed"] == []
    assert status["offload_geometry"]["rules"][-1]["ok"] is True
    text, status = poll(hybrid_tp2_snapshot(), tmp_path / "no-layout")
    assert consistent(text) == 1.0
    assert [r["rule"] for r in status["offload_geometry"]["rules"]] == [
        "slabs_within_budget", "resident_within_budget", "lookups_accounted"]


def load(tmp_path: Path, path: Path) -> cfg.Config:
    args = argparse.Namespace(engine_url="http://127.0.0.1:8000", expect_layout=str(path))
    return cfg.load(args, "serve", environ={})


def test_a_layout_that_does_not_derive_is_a_configuration_error(tmp_path: Path) -> None:
    assert load(tmp_path, SEED).expect_layout == SEED
    doc = json.loads(SEED.read_text())
    doc["attention"]["kv_heads"] = 3
    doc["tp"] = 2.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(cfg.ConfigError) as err:
        load(tmp_path, bad)
    assert err.value.errors == [
        f"--expect-layout / HELIOS_EXPORTER_EXPECT_LAYOUT: {bad}: tp: expected an integer, "
        "got 2.0"]
    doc["tp"] = 2
    bad.write_text(json.dumps(doc))
    with pytest.raises(cfg.ConfigError) as err:
        load(tmp_path, bad)
    assert err.value.errors == [
        "--expect-layout / HELIOS_EXPORTER_EXPECT_LAYOUT: attention.kv_heads: 3 is not "
        "divisible by tp 2 (each rank holds kv_heads/tp)"]
    with pytest.raises(cfg.ConfigError) as err:
        load(tmp_path, tmp_path / "absent.json")
    assert "cannot read it" in err.value.errors[0]
