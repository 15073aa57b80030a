"""Golden expositions for fixed engine inputs. Regenerate with `pytest --update-golden`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporter.collectors.offload import OffloadCollector
from exporter.collectors.passthrough import PassthroughCollector
from exporter.collectors.restore import RestoreCollector
from tests.conftest import REAL
from tests.helpers import StubEngine, check_golden, contract_example, make_sidecar

GOLDEN = Path(__file__).parents[2] / "golden"
SGLANG = (REAL / "sglang_production_metrics.prom").read_text()


def minimal() -> dict[str, Any]:
    return {"schema_version": 1, "generation": "g-minimal"}


def no_generation() -> dict[str, Any]:
    obj = contract_example()
    del obj["generation"]
    return obj


def second_poll() -> list[dict[str, Any]]:
    first = contract_example()
    second = contract_example()
    second["offload"]["evictions"]["row"]["attempts"] = 55
    second["offload"]["evictions"]["row"]["evicted"] = 44
    return [first, second]


CASES = {
    "contract_example": ([contract_example()], SGLANG),
    # Schema 3 with every field: the v1 example's fields unchanged, every v3 family added.
    "contract_example_v3": ([contract_example(3)], SGLANG),
    "minimal": ([minimal()], ""),
    "no_generation": ([no_generation()], ""),
    "row_pressure_two_polls": (second_poll(), ""),
}


def engine_exposition(polls: list[dict[str, Any]], metrics: str, tmp_path: Path) -> bytes:
    engine = StubEngine(polls[0], metrics)
    sidecar = make_sidecar(engine, tmp_path)

    async def run() -> None:
        for snap in polls:
            engine.snapshot = snap
            await sidecar.loop.cycle()
        await sidecar.client.aclose()

    asyncio.run(run())
    registry = CollectorRegistry()
    loop = sidecar.loop
    view = loop.view
    registry.register(OffloadCollector(lambda: view.engine, lambda: view.restore.state))
    registry.register(PassthroughCollector(lambda: view.engine))
    registry.register(RestoreCollector(lambda: view.restore, sidecar.keeper.bounds))
    sidecar.loop.close()
    return generate_latest(registry)


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_exposition(case: str, tmp_path: Path, update_golden: bool) -> None:
    polls, metrics = CASES[case]
    text = engine_exposition(polls, metrics, tmp_path)
    check_golden(text, GOLDEN / f"{case}.prom", update_golden)


def test_golden_row_pressure_counts_the_second_poll(tmp_path: Path) -> None:
    text = engine_exposition(second_poll(), "", tmp_path).decode()
    assert ('helios_offload_row_pressure_with_page_headroom_total'
            '{generation="g-20261129T0412Z-7f3a"} 15.0') in text


@pytest.mark.e2e
def test_schema_1_with_v3_fields_exports_exactly_the_v1_families(tmp_path: Path) -> None:
    """A schema 1 snapshot carrying every v3 field: unknown fields to schema 1, ignored; the
    exposition is the v1 example's, byte for byte."""
    v1 = {**contract_example(3), "schema_version": 1}
    text = engine_exposition([v1], SGLANG, tmp_path / "v1")
    assert text == (GOLDEN / "contract_example.prom").read_bytes()
