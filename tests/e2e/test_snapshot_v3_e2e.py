"""Schema 3 live: an engine on 127.0.0.1 serving a fixed snapshot, a real `helios-exporter serve`
polling it; /metrics carries every v3 series with the snapshot's values (as in the golden), a
schema 1 snapshot none of them, and a broken v3 section is left out and counted."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import FIXTURES, ROOT
from tests.e2e.procs import Stack, wait_for
from tests.exporter.snapshot.test_v3_read import V3_FAMILIES, V3_SERIES
from tests.helpers import promtool_check_metrics
from tools.harness import StubEngine

V3 = json.loads((FIXTURES / "snapshots" / "contract_example_v3.json").read_text())
GOLDEN = (ROOT / "tests" / "golden" / "contract_example_v3.prom").read_text()


@pytest.fixture
def engine() -> Iterator[StubEngine]:
    """Serves `snapshot` (schema 3 first) at /debug/offload/snapshot and an empty /metrics."""
    with StubEngine(V3) as e:
        yield e


def v3_lines(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if any(line.startswith(f) for f in V3_FAMILIES)
            or any(line.startswith(f"# {k} {f}") for f in V3_FAMILIES for k in ("HELP", "TYPE"))]


def metrics(url: str) -> str:
    return httpx.get(url + "/metrics", timeout=5).text


@pytest.mark.e2e
def test_schema_3_live(stack: Stack, engine: StubEngine) -> None:
    sidecar, url = stack.sidecar(engine.url, "--poll-interval", "0.3")
    wait_for(lambda: "helios_offload_prompt_tokens_total" in metrics(url), 30, "the v3 series",
             sidecar)
    text = metrics(url)
    assert v3_lines(text) == v3_lines(GOLDEN)  # every series, value for value
    assert len([line for line in v3_lines(text) if not line.startswith("#")]) == V3_SERIES
    promtool_check_metrics(text.encode())

    # Schema 1 with the same fields: none of the new families, and no error.
    engine.snapshot = {**V3, "schema_version": 1}
    wait_for(lambda: not v3_lines(metrics(url)), 30, "the v3 series to go", sidecar)
    text = metrics(url)
    assert "helios_engine_up 1.0" in text
    assert 'helios_exporter_source_errors_total{reason="schema",source="engine_snapshot"} 0.0' \
        in text

    # A broken v3 section: left out, counted, the rest read; the engine is still up.
    broken = json.loads(json.dumps(V3))
    broken["offload"]["evictions"]["row"]["age_seconds"]["buckets"]["10.0"] = 99
    engine.snapshot = broken
    dropped = ('helios_exporter_snapshot_fields_dropped_total'
               '{field="offload.evictions.row.age_seconds"}')
    wait_for(lambda: dropped in metrics(url), 30, "the dropped section to be counted", sidecar)
    text = metrics(url)
    assert "helios_engine_up 1.0" in text
    assert 'helios_offload_eviction_age_seconds_count{generation="g-20261129T0412Z-7f3a",' \
        'pressure="page"} 0.0' in text
    assert 'pressure="row"' not in "\n".join(
        line for line in text.splitlines()
        if line.startswith("helios_offload_eviction_age_seconds"))
    status = httpx.get(url + "/status", timeout=5).json()
    assert "offload.evictions.row.age_seconds" in status["snapshot_dropped_fields"]
    promtool_check_metrics(text.encode())
