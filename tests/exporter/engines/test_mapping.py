"""Each mapping against the exposition its engine version's own code renders
(tests/fixtures/engines/<kind>-<version>/: the families the code defines, and scenario steps):
a row naming a family that version does not define is refused, and the scenario's signals are
what the engine's own values say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.engines import MAPPINGS
from exporter.engines.exposition import parse
from exporter.engines.model import Mapping, Row
from exporter.engines.signals import BY_NAME
from exporter.engines.translate import translate
from tests.conftest import FIXTURES

ENGINES = FIXTURES / "engines"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def fixture(mapping: Mapping) -> Path:
    path = ENGINES / mapping.name
    if not path.is_dir():
        pytest.skip(f"no fixture rendered by {mapping.name}'s own code yet ({path})")
    return path


def defined(path: Path) -> set[str]:
    """Every sample name the version's code defines (families.json), in the colon form."""
    listed = json.loads((path / "families.json").read_text())
    return {f["name"] + suffix for f in listed["families"] for suffix in SUFFIXES[f["type"]]}


def undefined(mapping: Mapping, names: set[str]) -> list[str]:
    return sorted({f"{row.signal}: {family}" for row in mapping.rows for family in row.families
                   if family not in names})


@pytest.mark.parametrize("kind", sorted(MAPPINGS))
def test_every_row_names_a_family_its_version_defines(kind: str) -> None:
    mapping = MAPPINGS[kind]
    names = defined(fixture(mapping))
    assert undefined(mapping, names) == []
    for family in mapping.marker:
        assert family in names, family


def test_a_row_naming_an_undefined_family_is_refused() -> None:
    mapping = MAPPINGS["sglang"]
    names = defined(fixture(mapping))
    moved = "sglang:hicache_host_mamba_total_states_v2"
    rows = tuple(Row(r.signal, r.how, r.unit, r.text, (moved,), r.read) if
                 r.signal == "slab_capacity.row" else r for r in mapping.rows)
    bad = Mapping(mapping.kind, mapping.version, rows)
    assert undefined(bad, names) == [f"slab_capacity.row: {moved}"]


def engine_values(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The exposition read by prometheus_client's own parser (not the sidecar's)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def one(values: dict[str, Any], name: str, **match: str) -> float | None:
    found = [v for labels, v in values.get(name, ()) if all(labels.get(k) == w
                                                            for k, w in match.items())]
    return max(found) if found else None


def field(tr: Any, path: str) -> Any:
    node = tr.fields
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def test_sglang_scenario_reads_as_the_engine_says() -> None:
    mapping = MAPPINGS["sglang"]
    path = fixture(mapping)
    steps = json.loads((path / "fixture.json").read_text())["steps"]
    seen = []
    for step in steps:
        text = (path / step["file"]).read_text()
        tr = translate(mapping, parse(text, mapping.wanted()))
        assert tr.dropped == {}, step["file"]
        v = engine_values(text)
        total = one(v, "sglang:hicache_host_mamba_total_states")
        used = one(v, "sglang:hicache_host_mamba_used_states")
        assert field(tr, "slabs.row.capacity") == total
        assert field(tr, "slabs.row.free") == total - used
        size = one(v, "sglang:page_size")
        host_total = one(v, "sglang:hicache_host_total_tokens")
        host_used = one(v, "sglang:hicache_host_used_tokens")
        assert field(tr, "slabs.page.capacity") == host_total // size
        assert field(tr, "slabs.page.free") == (host_total - host_used) // size
        assert field(tr, "geometry.page_tokens") == size
        stored = one(v, "sglang:hicache_backup_tokens_total", pool="kv") or 0.0
        assert field(tr, "host.stores") == stored
        loaded = one(v, "sglang:load_back_tokens_total", pool="kv")
        # Absent until the first load-back in the engine; 0 here, since its host tier exists.
        assert field(tr, "host.tokens_restored") == (loaded or 0.0)
        for signal, how in tr.coverage.items():
            row = next(r for r in mapping.rows if r.signal == signal)
            assert how in (row.how, "absent")
        seen.append((field(tr, "host.stores"), field(tr, "host.tokens_restored")))
    # The scenario: stores without reuse, then reuse from the host tier.
    assert seen[1][0] > 0 and seen[1][1] == 0
    assert seen[2][1] > 0


def test_every_signal_has_a_row_in_every_mapping() -> None:
    for mapping in MAPPINGS.values():
        assert [r.signal for r in mapping.rows] == list(BY_NAME)
        with pytest.raises(AssertionError, match="one row per signal"):
            Mapping(mapping.kind, mapping.version, mapping.rows[1:])


def test_vllm_scenario_reads_as_the_engine_says() -> None:
    mapping = MAPPINGS["vllm"]
    path = fixture(mapping)
    for step in json.loads((path / "fixture.json").read_text())["steps"]:
        text = (path / step["file"]).read_text()
        exp = parse(text, mapping.wanted())
        tr = translate(mapping, exp)
        assert tr.dropped == {}, step["file"]
        v = engine_values(text)
        assert exp.start_time == one(v, "process_start_time_seconds")
        host = one(v, "vllm:prompt_tokens_cached_by_source_total", source="host")
        assert field(tr, "prompt_tokens.host_restored") == host
        assert field(tr, "host.tokens_restored") == host
        stored = one(v, "vllm:kv_offload_store_bytes_total")
        if stored is None:  # the deprecated family says the same
            stored = one(v, "vllm:kv_offload_total_bytes_total", transfer_type="GPU_to_CPU")
        assert field(tr, "host.stored_bytes") == stored
        # Occupancy is never read from the share pinned by transfers.
        if one(v, "vllm:simple_kv_offload_used_blocks") is None:
            assert "slabs" not in tr.fields and tr.coverage["slab_free.page"] == "absent"
        else:
            info = next(labels for labels, _ in v["vllm:simple_kv_offload_info"])
            capacity = float(info["capacity_blocks"])
            assert field(tr, "slabs.page.free") == capacity - one(
                v, "vllm:simple_kv_offload_used_blocks")
