"""Every snapshot string that could become a label value, with every hostile string, in-process.

The process suite (test_hostile_engine.py) sends one field of each section through a real sidecar;
this covers the full cross product in milliseconds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from exporter.labels import MISS_REASONS, ErrorReason, miss_counts
from exporter.snapshot.model import SnapshotError
from exporter.snapshot.parse import parse_snapshot
from tests.hostile.cases import INJECT, MARK
from tests.hostile.stub import sane_snapshot

FIELDS = ("generation", "ranks.0.gpu_uuid", "ranks.1.gpu_uuid", "admission.state")
IDENTITY_FIELDS = ("identity.image_digest", "identity.container_id", "identity.package",
                   "identity.checkpoint")
HOSTILE_STRINGS = {
    "injection": INJECT,
    "trailing_newline": f"{MARK}\n",
    "leading_newline": f"\n{MARK}",
    "crlf": f"{MARK}\r\n",
    "nul": f"{MARK}\x00",
    "quote": f'{MARK}"',
    "backslash": f"{MARK}\\",
    "brace": f"{MARK}}}",
    "space": f"{MARK} x",
    "empty": "",
    "non_ascii": f"{MARK}\u00e9",
    "rtl_override": f"{MARK}\u202e",
    "line_separator": f"{MARK}\u2028",
    "huge": MARK * 10_000,
}


def _set(snap: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = snap
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


@pytest.mark.parametrize("kind", sorted(HOSTILE_STRINGS))
@pytest.mark.parametrize("field", FIELDS)
def test_hostile_string_in_label_field_is_a_schema_error(field: str, kind: str) -> None:
    snap = sane_snapshot()
    _set(snap, field, HOSTILE_STRINGS[kind])
    with pytest.raises(SnapshotError) as err:
        parse_snapshot(json.dumps(snap).encode())
    assert err.value.reason is ErrorReason.SCHEMA
    assert err.value.path == field


@pytest.mark.parametrize("kind", sorted(HOSTILE_STRINGS))
@pytest.mark.parametrize("field", IDENTITY_FIELDS)
def test_hostile_identity_string_is_dropped_not_exported(field: str, kind: str) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from exporter.collectors.offload import OffloadCollector
    from exporter.cycle.derive import EnginePicture
    from exporter.restore.window import RestoreState

    snap = sane_snapshot()
    _set(snap, field, HOSTILE_STRINGS[kind])
    parsed = parse_snapshot(json.dumps(snap).encode())
    assert parsed.dropped_fields == (field,)
    assert getattr(parsed.identity, field.split(".")[1]) is None
    reg = CollectorRegistry()
    state = EnginePicture(snapshot=parsed, snapshot_current=True, polled=True)
    reg.register(OffloadCollector(lambda: state, RestoreState))
    text = generate_latest(reg).decode()
    assert MARK not in text
    assert reg.get_sample_value("helios_offload_slab_capacity",
                                {"generation": parsed.generation, "kind": "row"}) is not None


@pytest.mark.parametrize("kind", sorted(HOSTILE_STRINGS))
def test_hostile_miss_keys_map_onto_the_closed_set(kind: str) -> None:
    key = HOSTILE_STRINGS[kind]
    snap = sane_snapshot()
    snap["offload"]["lookups"]["misses"] = {key: 3, f"evicted:{key}": 4}
    parsed = parse_snapshot(json.dumps(snap).encode())
    assert parsed.offload is not None and parsed.offload.lookups is not None
    assert parsed.offload.lookups.misses is not None
    counts = miss_counts(parsed.offload.lookups.misses)
    assert set(counts) == set(MISS_REASONS)
    assert counts["evicted"] == 4
    assert counts["other"] == 3


def test_derived_generation_ignores_hostile_identity_only_when_valid() -> None:
    """No generation: the derived one is a fixed-shape hash, whatever the identity held."""
    snap = sane_snapshot()
    del snap["generation"]
    parsed = parse_snapshot(json.dumps(snap).encode())
    assert parsed.generation_derived
    assert parsed.generation.startswith("d-") and len(parsed.generation) == 18
    snap["identity"]["package"] = INJECT
    hostile = parse_snapshot(json.dumps(snap).encode())
    assert hostile.generation.startswith("d-") and len(hostile.generation) == 18
    assert hostile.identity is not None and hostile.identity.package is None
