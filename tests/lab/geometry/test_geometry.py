"""`helios-exporter geometry` as an engineer runs it: the records and slabs of a layout, every
failed check on standard error with exit 2, and `--partitions` shown, never chosen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from commands import cli
from tests.conftest import FIXTURES

SEED = FIXTURES / "layouts" / "hybrid-tp2.json"


def geometry(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.run(cli.parse(["geometry", *args]))
    out, err = capsys.readouterr()
    return code, out, err


def layout_file(tmp_path: Path, **changes: Any) -> Path:
    doc = json.loads(SEED.read_text())
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = doc
        for key in parents:
            node = node[key]
        node[last] = value
    out = tmp_path / "layout.json"
    out.write_text(json.dumps(doc))
    return out


def test_hybrid_tp2_in_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = geometry(capsys, "--layout", str(SEED))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "layout hybrid-tp2: tp 2, 64 tokens a page, each rank's share aligned to 4,096 B",
        "record         per rank          aligned   per host record (2 ranks)",
        "page          524,288 B        524,288 B   1,048,576 B (1 MiB)",
        "row        81,793,024 B     81,793,024 B   163,586,048 B (156.008 MiB)",
        "",
        "budget 34,359,738,368 B (32 GiB), row fraction 0.25 (sized_counts: whole rows in the "
        "row share, whole pages in the rest)",
        "rows           52 x   163,586,048 B =  8,506,474,496 B",
        "pages      24,655 x     1,048,576 B = 25,852,641,280 B",
        "unused                                       622,592 B",
    ]


def test_hybrid_tp2_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = geometry(capsys, "--layout", str(SEED), "--json", "--row-fraction", "1/2")
    assert code == 0
    doc = json.loads(out)
    assert (doc["page_record_bytes"], doc["row_record_bytes"]) == (1048576, 163586048)
    assert doc["per_rank"] == {"page": {"bytes": 524288, "aligned_bytes": 524288},
                               "row": {"bytes": 81793024, "aligned_bytes": 81793024}}
    # half of 32 GiB: 105 rows; the rest in pages
    assert (doc["rows"], doc["pages"], doc["row_fraction"]) == (105, 16387, "0.5")
    assert doc["rows"] * doc["row_record_bytes"] + doc["pages"] * doc["page_record_bytes"] \
        + doc["unused_bytes"] == doc["budget_bytes"] == 32 << 30


@pytest.mark.parametrize(("changes", "args", "message"), [
    ({"attention__kv_heads": 3}, (),
     "attention.kv_heads: 3 is not divisible by tp 2 (each rank holds kv_heads/tp)"),
    ({"recurrent__state_key_dim": 1 << 50}, (), "overflows a signed 64-bit byte count"),
    ({"limits__max_mapping_bytes": 8 << 30}, (),
     "the page slab (24655 x 1048576 = 25852641280 bytes) exceeds limits.max_mapping_bytes "
     "8589934592"),
    ({}, ("--budget-bytes", str(2 << 30)),
     "the row slab holds 3 rows of 163586048 bytes at 2147483648 bytes and row fraction 0.25, "
     "fewer than limits.min_rows 16"),
    ({}, ("--budget-bytes", str(1 << 30), "--row-fraction", "0.2"),
     "fewer than limits.min_pages 1024"),
])
def test_each_failed_check_exits_2_with_its_message(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, changes: dict[str, Any],
        args: tuple[str, ...], message: str) -> None:
    path = layout_file(tmp_path, **changes)
    code, out, err = geometry(capsys, "--layout", str(path), *args)
    assert (code, out) == (2, "")
    assert err.startswith("helios-exporter geometry: ")
    assert message in err, err


def test_a_missing_file_and_bad_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = geometry(capsys, "--layout", str(tmp_path / "none.json"))
    assert code == 2 and "cannot read it" in err
    (tmp_path / "x.json").write_text("[1]")
    code, _, err = geometry(capsys, "--layout", str(tmp_path / "x.json"))
    assert code == 2 and "a layout is a JSON object, not an array" in err


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (("--budget-bytes", "32GiB"), ("--row-fraction", "a quarter"),
                 ("--fractions", ",")):
        with pytest.raises(SystemExit) as exc:
            geometry(capsys, "--layout", str(SEED), *args)
        assert exc.value.code == 2
    code, _, err = geometry(capsys, "--layout", str(SEED), "--evidence", "e.json")
    assert code == 2 and "--evidence and --phase go with --partitions" in err
    # Fractions without --partitions would be ignored: said instead.
    code, out, err = geometry(capsys, "--layout", str(SEED), "--fractions", "0.2,0.3")
    assert code == 2 and out == "" and "give --partitions too" in err
    code, out, _ = geometry(capsys, "--layout", str(SEED), "--fractions", "0.2,0.3",
                            "--partitions")
    assert code == 0 and "0.2" in out


# -- partitions ---------------------------------------------------------------------------------
def evidence(tmp_path: Path, stores: int = 156, pages_used: int = 832,
             retired_pages: int = 1664) -> Path:
    """An evidence.json with one phase, in the shape `evidence`/`probe` write (format 1)."""
    def edge(used: int, retired: int) -> dict[str, Any]:
        return {"slabs": {"row": {"capacity": 52, "free": 0, "record_bytes": 163586048},
                          "page": {"capacity": 24655, "free": 24655 - used,
                                   "record_bytes": 1048576}},
                "counters": {"retired_leaves.page": retired}}
    doc = {"format": 1, "phases": [{
        "name": "fwd/forward-1", "valid": True, "invalid_reasons": [],
        "begin": edge(0, 0), "end": edge(pages_used, retired_pages),
        "deltas": {"host_stores": stores, "requests": 52.0}}]}
    out = tmp_path / "evidence.json"
    out.write_text(json.dumps(doc))
    return out


def test_partitions_list_every_fraction_given_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = geometry(capsys, "--layout", str(SEED), "--partitions", "--json",
                            "--fractions", "0.75,0.25,1/16")
    assert code == 0
    doc = json.loads(out)
    rows = [(p["row_fraction"], p["rows"], p["pages"], p["breaks"]) for p in doc["partitions"]]
    # listed as given (never sorted by anything), the limits each breaks marked, none picked
    assert rows == [("0.75", 157, 8274, []), ("0.25", 52, 24655, []),
                    ("0.0625", 13, 30739, ["min_rows"])]
    assert doc["demand"] is None
    assert not {"choice", "chosen", "best", "recommended"} & set(doc)
    assert all(set(p) == {"row_fraction", "rows", "pages", "row_slab_bytes", "page_slab_bytes",
                          "unused_bytes", "breaks"} for p in doc["partitions"])


def test_partitions_beside_a_phases_demand(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    path = evidence(tmp_path)
    code, out, err = geometry(capsys, "--layout", str(SEED), "--partitions", "--evidence",
                              str(path), "--fractions", "0.25,0.75")
    assert (code, err) == (0, "")
    assert ("checkpoint demand of phase fwd/forward-1 (" + str(path) + "): 156 rows "
            "(checkpoints stored), 2,496 pages (pages allocated), 3 rows and 48 pages per "
            "request over 52 requests") in out
    table = out.split("Partitions of")[1].splitlines()
    assert table[3].split() == ["0.25", "52", "24,655", "8,506,474,496", "25,852,641,280",
                                "622,592", "-104", "+22,159", "-"]
    assert table[4].split()[:2] == ["0.75", "157"] and table[4].split()[6] == "+1"
    assert out.rstrip().endswith("several stores per request are not several useful "
                                 "endpoints.")
    assert "Shown, not chosen: no row fraction is picked here." in out


def test_partitions_json_carries_the_demand(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    code, out, _ = geometry(capsys, "--layout", str(SEED), "--partitions", "--json",
                            "--evidence", str(evidence(tmp_path)), "--fractions", "0.25")
    assert code == 0
    doc = json.loads(out)
    assert doc["demand"]["rows"] == 156 and doc["demand"]["pages"] == 2496
    assert (doc["partitions"][0]["rows_left"], doc["partitions"][0]["pages_left"]) == (-104, 22159)


def test_evidence_problems_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = evidence(tmp_path)
    code, _, err = geometry(capsys, "--layout", str(SEED), "--partitions", "--evidence",
                            str(path), "--phase", "nope")
    assert code == 2 and "no phase 'nope' (phases: fwd/forward-1)" in err
    doc = json.loads(path.read_text())
    doc["phases"][0]["valid"] = False
    doc["phases"][0]["invalid_reasons"] = ["the generation changed"]
    path.write_text(json.dumps(doc))
    code, _, err = geometry(capsys, "--layout", str(SEED), "--partitions", "--evidence", str(path))
    assert code == 2 and "is not valid evidence (the generation changed)" in err
    path.write_text("{}")
    code, _, err = geometry(capsys, "--layout", str(SEED), "--partitions", "--evidence", str(path))
    assert code == 2 and "not an evidence.json" in err


def test_evidence_from_an_engine_with_other_records_says_so(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = evidence(tmp_path)
    doc = json.loads(path.read_text())
    doc["phases"][0]["begin"]["slabs"]["row"]["record_bytes"] = 16 << 20
    path.write_text(json.dumps(doc))
    code, out, _ = geometry(capsys, "--layout", str(SEED), "--partitions", "--evidence", str(path))
    assert code == 0
    assert ("the evidence's engine had other records (row 16,777,216 B, not 163,586,048 B): its "
            "demand counts that engine's records, not this layout's") in out
