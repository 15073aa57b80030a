from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from exporter.cycle import geometry
from exporter.snapshot.parse import snapshot_from_obj
from tests.helpers import StubEngine, contract_example, make_sidecar


def check(mutate: Any = None) -> geometry.Geometry | None:
    obj = contract_example()
    if mutate is not None:
        mutate(obj["offload"])
    return geometry.check(snapshot_from_obj(obj).offload)


def test_contract_example_holds_exactly() -> None:
    # 512 x 16 MiB + 24576 x 1 MiB is exactly the 32 GiB budget; 52 hits + 52 misses = 104.
    g = check()
    assert g is not None and g.consistent and g.failed == ()
    assert [r.rule for r in g.rules] == ["slabs_within_budget", "resident_within_budget",
                                        "lookups_accounted"]
    assert g.rules[0].detail == ("row 512 x 16777216 + page 24576 x 1048576 = 34359738368 "
                                 "<= budget_bytes 34359738368")


def test_slabs_larger_than_the_budget_fail_and_say_why() -> None:
    def grow(off: dict[str, Any]) -> None:
        off["slabs"]["page"]["capacity"] = 24577
    g = check(grow)
    assert g is not None and not g.consistent
    (failed,) = g.failed
    assert failed.rule == "slabs_within_budget"
    assert (failed.value, failed.limit) == (34359738368 + 1048576, 34359738368)
    assert failed.detail.endswith("= 34360786944 > budget_bytes 34359738368")


def test_resident_bytes_above_the_budget_fail() -> None:
    def over(off: dict[str, Any]) -> None:
        off["resident"]["bytes"] = off["budget_bytes"] + 1
    g = check(over)
    assert g is not None and [r.rule for r in g.failed] == ["resident_within_budget"]


def test_more_hits_and_misses_than_lookups_fail() -> None:
    def miss(off: dict[str, Any]) -> None:
        off["lookups"]["misses"]["evicted:row"] = 1  # every miss reason counts
    g = check(miss)
    assert g is not None and [r.rule for r in g.failed] == ["lookups_accounted"]
    assert g.failed[0].detail == "hits 52 + misses 53 = 105 > lookups.total 104"


def test_fewer_outcomes_than_lookups_are_fine() -> None:
    def inflight(off: dict[str, Any]) -> None:
        off["lookups"]["total"] = 110  # lookups whose outcome is not counted yet
    g = check(inflight)
    assert g is not None and g.consistent


def test_rules_without_inputs_are_not_checked() -> None:
    def strip(off: dict[str, Any]) -> None:
        del off["budget_bytes"]
        del off["lookups"]["hits"], off["lookups"]["misses"]
    assert check(strip) is None
    minimal = snapshot_from_obj({"schema_version": 1, "generation": "g-1"})
    assert geometry.check(minimal.offload) is None

    def budget_only(off: dict[str, Any]) -> None:
        del off["slabs"], off["resident"], off["lookups"]
    g = check(budget_only)
    assert g is None


def exposition(snapshot: dict[str, Any], tmp_path: Path) -> dict[str, float]:
    """The sidecar's /metrics after one poll of `snapshot`, as {series: value}."""
    return poll(snapshot, tmp_path)[0]


def poll(snapshot: dict[str, Any], tmp_path: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """The sidecar's /metrics ({series: value}) and /status after one poll of `snapshot`."""
    engine = StubEngine(snapshot)
    sidecar = make_sidecar(engine, tmp_path)

    async def run() -> None:
        await sidecar.loop.cycle()
        await sidecar.client.aclose()

    asyncio.run(run())
    sidecar.close()
    text = sidecar.cache.render(False).decode()
    return {
        s.name + str(sorted(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text) for s in fam.samples
    }, sidecar.status()


def test_geometry_and_ranks_are_exported(tmp_path: Path) -> None:
    obj = contract_example()
    obj["offload"]["resident"]["bytes"] = obj["offload"]["budget_bytes"] + 1
    got = exposition(obj, tmp_path)
    gen = [("generation", obj["generation"])]
    assert got["helios_offload_geometry_consistent" + str(gen)] == 0.0
    assert got["helios_engine_ranks" + str(gen)] == 2.0


def test_geometry_and_ranks_are_absent_without_their_inputs(tmp_path: Path) -> None:
    obj = contract_example()
    del obj["ranks"], obj["offload"]["budget_bytes"], obj["offload"]["lookups"]
    got = exposition(obj, tmp_path)
    assert not any(k.startswith(("helios_offload_geometry_consistent", "helios_engine_ranks"))
                   for k in got)
    assert "helios_offload_slab_capacity" + str([("generation", obj["generation"]),
                                                 ("kind", "row")]) in got


def test_status_names_the_failed_rule_and_its_numbers(tmp_path: Path) -> None:
    obj = contract_example()
    obj["offload"]["lookups"]["total"] = 100
    _, status = poll(obj, tmp_path / "bad")
    geo = status["offload_geometry"]
    assert geo["consistent"] is False and geo["failed"] == ["lookups_accounted"]
    (failed,) = [r for r in geo["rules"] if not r["ok"]]
    assert failed == {"rule": "lookups_accounted", "ok": False, "value": 104, "limit": 100,
                      "detail": "hits 52 + misses 52 = 104 > lookups.total 100"}
    _, status = poll({"schema_version": 1, "generation": "g-bare"}, tmp_path / "bare")
    assert status["offload_geometry"] is None
