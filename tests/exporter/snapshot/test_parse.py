from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from types import FrameType

import pytest

from exporter import catalogue
from exporter.labels import ErrorReason
from exporter.snapshot.model import SnapshotError
from exporter.snapshot.parse import parse_snapshot, snapshot_from_obj
from exporter.snapshot.validate import schema
from tests.helpers import contract_example


def test_contract_example_parses_to_typed_values() -> None:
    snap = snapshot_from_obj(contract_example())
    assert snap.generation == "g-20261129T0412Z-7f3a"
    assert not snap.generation_derived
    assert snap.admission is not None and snap.admission.state == "open"
    assert snap.admission.inflight_requests == 3
    assert snap.offload is not None
    assert snap.offload.slabs["row"].capacity == 512
    assert snap.offload.slabs["page"].free == 20480
    outcomes = catalogue.get("helios_offload_eviction_outcomes_total").reader()
    assert outcomes is not None
    assert {k: v for k, v in (outcomes(snap.offload) or {}).items() if k[0] == "row"} == {
        ("row", "evicted"): 31, ("row", "pinned"): 4, ("row", "non_durable"): 3,
        ("row", "no_eligible"): 2}
    assert snap.offload.lookups is not None
    assert snap.offload.lookups.misses == {"no_prefix": 40, "key_mismatch:ckpt=ab12": 12}
    assert snap.ranks is not None and [r.rank for r in snap.ranks] == [0, 1]


def test_unknown_fields_are_ignored() -> None:
    obj = contract_example()
    obj["future_field"] = {"x": [1, 2]}
    obj["offload"]["slabs"]["row"]["color"] = "blue"
    snap = snapshot_from_obj(obj)
    assert snap.offload is not None and snap.offload.slabs["row"].free == 0


def test_missing_sections_stay_absent() -> None:
    obj = contract_example()
    del obj["offload"]["lookups"], obj["offload"]["host"], obj["admission"], obj["ranks"]
    snap = snapshot_from_obj(obj)
    assert snap.admission is None and snap.ranks is None
    assert snap.offload is not None
    assert snap.offload.lookups is None and "host" not in snap.offload.fields


def test_missing_generation_is_derived_from_identity_and_start() -> None:
    obj = contract_example()
    del obj["generation"]
    first = snapshot_from_obj(obj)
    again = snapshot_from_obj(copy.deepcopy(obj))
    obj["started_at"] += 60
    restarted = snapshot_from_obj(obj)
    assert first.generation_derived
    assert first.generation == again.generation
    assert first.generation != restarted.generation
    assert first.generation.startswith("d-") and len(first.generation) <= 64


@pytest.mark.parametrize(
    ("mutate", "path", "reason"),
    [
        (lambda o: o["offload"]["slabs"]["row"].__setitem__("free", "x"),
         "offload.slabs.row.free", ErrorReason.SCHEMA),
        (lambda o: o["offload"]["slabs"]["row"].__setitem__("free", 513),
         "offload.slabs.row.free", ErrorReason.SCHEMA),
        (lambda o: o["offload"]["evictions"]["row"].__setitem__("attempts", -1),
         "offload.evictions.row.attempts", ErrorReason.SCHEMA),
        (lambda o: o.__setitem__("generation", 'bad"}\n'), "generation", ErrorReason.SCHEMA),
        (lambda o: o.__setitem__("generation", "g" * 65), "generation", ErrorReason.SCHEMA),
        (lambda o: o["admission"].__setitem__("state", "maybe"), "admission.state",
         ErrorReason.SCHEMA),
        (lambda o: o.__setitem__("schema_version", 2), "schema_version",
         ErrorReason.UNSUPPORTED_VERSION),
        (lambda o: o["offload"]["lookups"]["misses"].__setitem__("no_prefix", 1.5),
         "offload.lookups.misses.no_prefix", ErrorReason.SCHEMA),
    ],
)
def test_errors_name_the_field(mutate, path: str, reason: ErrorReason) -> None:  # type: ignore[no-untyped-def]
    obj = contract_example()
    mutate(obj)
    with pytest.raises(SnapshotError) as info:
        snapshot_from_obj(obj)
    assert info.value.path == path
    assert info.value.reason == reason


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"<html>502</html>", b"\xff\xfe{}", b"NaN", b'{"schema_version": Infinity}',
     b"[" * 50000, b"1" * 5000],
)
def test_undecodable_bodies(body: bytes) -> None:
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(body)
    assert info.value.reason == ErrorReason.DECODE


def test_huge_number_in_a_counter_is_a_schema_error() -> None:
    text = json.dumps(contract_example()).replace('"attempts": 40', '"attempts": 1e400')
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(text.encode())
    assert info.value.path == "offload.evictions.row.attempts"


def test_schema_is_shipped_and_is_draft_2020_12() -> None:
    assert schema()["$schema"].endswith("2020-12/schema")
    assert schema()["properties"]["schema_version"] == {"const": 1}


def test_docs_show_the_shipped_schema() -> None:
    from tests.conftest import ROOT

    doc = (ROOT / "docs" / "snapshot.md").read_text()
    shipped = (ROOT / "exporter" / "schema" / "snapshot-v1.schema.json").read_text()
    assert "```json\n" + shipped + "```" in doc, "docs/snapshot.md drifted from the schema"


def test_unusable_identity_value_is_left_out_not_fatal() -> None:
    obj = contract_example()
    obj["identity"]["container_id"] = "a b"
    obj["identity"]["package"] = 7
    snap = snapshot_from_obj(obj)
    assert snap.dropped_fields == ("identity.container_id", "identity.package")
    assert snap.identity is not None
    assert (snap.identity.container_id, snap.identity.package) == (None, None)
    assert snap.identity.image_digest == "sha256:9f2c..."


@pytest.mark.parametrize("version", [1, 3])
def test_a_body_goes_one_way_through_the_snapshot_package(version: int) -> None:
    """Decoded, validated, built: no call goes back into a module of exporter/snapshot/ that the
    parse had already left (the calls are followed with a profile hook)."""
    obj = contract_example(version)  # schema 3's: every addition, each through v3.py
    obj["identity"]["engine"] = "helios-simulator"
    body = json.dumps(obj).encode()
    parse_snapshot(body)  # warm the caches (the validators, the label pattern)
    package = str(Path(parse_snapshot.__code__.co_filename).parent)
    stack: list[str] = []
    entered: list[str] = []
    back: list[str] = []

    def follow(frame: FrameType, event: str, arg: object) -> None:
        module = frame.f_code.co_filename
        if not module.startswith(package):
            return
        if event == "call":
            if stack[-1:] != [module]:
                if module in entered and module not in stack:
                    back.append(f"{Path(stack[-1]).name} -> {Path(module).name}")
                entered.append(module)
            stack.append(module)
        elif event == "return":
            stack.pop()

    sys.setprofile(follow)
    try:
        parse_snapshot(body)
    finally:
        sys.setprofile(None)
    assert len(set(entered)) >= 3  # parse, limits, validate (and v3, model)
    assert back == []
