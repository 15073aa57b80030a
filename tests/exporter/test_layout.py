"""exporter/layout.py: every check with its own message, the byte arithmetic of both records, the
partition sized_counts carves, and the properties the derivation must keep (hypothesis)."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import layout as lay
from tests.conftest import FIXTURES

SEED = FIXTURES / "layouts" / "hybrid-tp2.json"
GIB = 1 << 30


def seed_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(SEED.read_text())
    return doc


def problems(doc: Any) -> list[lay.Problem]:
    """What parse, records and the default partition find, stage by stage, as the command does."""
    try:
        layout = lay.parse(doc)
        lay.derive(layout, 32 * GIB, Fraction(1, 4))
    except lay.LayoutError as exc:
        return list(exc.problems)
    return []


def only(doc: Any) -> lay.Problem:
    found = problems(doc)
    assert len(found) == 1, found
    return found[0]


def edited(path: str, value: Any) -> dict[str, Any]:
    doc = seed_doc()
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


_DELETE = object()


# -- the hybrid-tp2 layout, by hand ---------------------------------------------------------------
def test_hybrid_tp2_records_by_hand() -> None:
    recs = lay.records(lay.load(SEED))
    # page, per rank: 64 tokens x 8 layers x 2 (K, V) x 4/2 heads x 128 x 2 bytes
    assert recs.page == lay.Share(64 * 8 * 2 * 2 * 128 * 2, 524288)
    # row, per rank: 38 layers x (64/2 x 128 x 128 + 9216/2 x (4 - 1)) x 4 bytes
    assert recs.row.bytes == 38 * (32 * 128 * 128 + 4608 * 3) * 4 == 81793024
    assert recs.row.aligned == 81793024  # already a multiple of 4096
    assert (recs.page_record_bytes, recs.row_record_bytes) == (1 << 20, 163586048)


def test_hybrid_tp2_partition_is_note_001s_tier() -> None:
    recs, part = lay.derive(lay.load(SEED), 32 * GIB, Fraction(1, 4))
    # 52 rows fill a quarter of 32 GiB: 52 x 163586048 <= 8 GiB < 53 x 163586048
    assert part.rows == 52
    assert 52 * recs.row_record_bytes <= 8 * GIB < 53 * recs.row_record_bytes
    assert part.pages == (32 * GIB - 52 * 163586048) // (1 << 20) == 24655
    assert part.unused_bytes == 32 * GIB - 52 * 163586048 - 24655 * (1 << 20) == 622592


def test_alignment_rounds_each_rank_share_up() -> None:
    doc = edited("limits.alignment", 1 << 20)
    recs = lay.records(lay.parse(doc))
    assert recs.page.aligned == 1 << 20  # 512 KiB -> 1 MiB
    assert recs.row.bytes == 81793024  # 78.0039 MiB -> 79 MiB
    assert recs.row.aligned == 79 << 20
    assert (recs.page_record_bytes, recs.row_record_bytes) == (2 << 20, 158 << 20)


# -- every check, its own message ---------------------------------------------------------------
def test_kv_heads_not_divisible_by_tp() -> None:
    p = only(edited("attention.kv_heads", 3))
    assert p.check == "tp_partition"
    assert p.message == "attention.kv_heads: 3 is not divisible by tp 2 (each rank holds kv_heads/tp)"


def test_state_heads_and_conv_channels_not_divisible_by_tp_both_reported() -> None:
    doc = edited("tp", 4)
    doc["recurrent"]["state_heads"] = 6
    doc["recurrent"]["conv_channels"] = 9218
    found = problems(doc)
    assert [p.check for p in found] == ["tp_partition", "tp_partition"]
    assert [p.message.split(":")[0] for p in found] == ["recurrent.state_heads",
                                                        "recurrent.conv_channels"]


def test_an_overflowing_product() -> None:
    p = only(edited("block_tokens", 1 << 50))
    assert p.check == "overflow"
    assert p.message.startswith("the page share per rank (block_tokens 1125899906842624 x ")
    assert p.message.endswith("overflows a signed 64-bit byte count (at most "
                              "9223372036854775807)")


def test_an_overflowing_record_after_alignment_and_ranks() -> None:
    doc = edited("tp", 2)
    doc["recurrent"].update(layers=1, state_heads=2, state_key_dim=1, state_value_dim=1,
                            conv_channels=2, conv_kernel=1)
    doc["dtype"]["state_bytes"] = 1
    doc["limits"]["alignment"] = 1 << 62  # one rank's share aligns to 2^62; two ranks 2^63
    found = problems(doc)
    assert {p.check for p in found} == {"overflow"}
    assert any(p.message.startswith("the row record (2 ranks x 4611686018427387904 aligned bytes")
               for p in found)


def test_a_slab_over_max_mapping_bytes() -> None:
    p = only(edited("limits.max_mapping_bytes", 16 * GIB))
    assert p.check == "max_mapping_bytes"
    assert p.message == ("the page slab (24655 x 1048576 = 25852641280 bytes) exceeds "
                         "limits.max_mapping_bytes 17179869184")


def test_a_budget_below_the_minimums() -> None:
    layout = lay.load(SEED)
    with pytest.raises(lay.LayoutError) as err:
        lay.derive(layout, GIB, Fraction(1, 4))
    assert err.value.checks == ("min_rows", "min_pages")
    rows, pages = (p.message for p in err.value.problems)
    # 256 MiB holds 1 row of 156 MiB; the other 868 MiB hold 867 whole pages
    assert rows == ("the row slab holds 1 row of 163586048 bytes at 1073741824 bytes and row "
                    "fraction 0.25, fewer than limits.min_rows 16")
    assert pages == ("the page slab holds 867 pages of 1048576 bytes at 1073741824 bytes and "
                     "row fraction 0.25, fewer than limits.min_pages 1024")


@pytest.mark.parametrize(("path", "value", "check", "message"), [
    ("tp", 2.0, "integer", "tp: expected an integer, got 2.0"),
    ("block_tokens", "64", "integer", 'block_tokens: expected an integer, got "64"'),
    ("attention.layers", True, "integer", "attention.layers: expected an integer, got true"),
    ("recurrent.conv_kernel", 0, "positive", "recurrent.conv_kernel: must be at least 1, got 0"),
    ("dtype.kv_bytes", -2, "positive", "dtype.kv_bytes: must be at least 1, got -2"),
    ("limits.min_rows", _DELETE, "missing_field", "limits.min_rows: missing"),
    ("name", "", "name", 'name: expected 1-128 printable characters, got ""'),
    ("name", _DELETE, "missing_field", "name: missing"),
    ("recurrent", [1, 2], "json", "recurrent: expected an object, got an array"),
    ("limits.alignmnet", 4096, "unknown_field",
     "limits.alignmnet: not a layout field (known: alignment, max_mapping_bytes, min_rows, "
     "min_pages)"),
])
def test_each_field_check(path: str, value: Any, check: str, message: str) -> None:
    p = only(edited(path, value))
    assert (p.check, p.message) == (check, message)


def test_every_field_problem_is_reported_at_once() -> None:
    doc = edited("tp", 0)
    doc["attention"]["head_dim"] = 1.5
    doc["extra"] = 1
    assert sorted(p.check for p in problems(doc)) == ["integer", "positive", "unknown_field"]


def test_messages_differ_between_checks() -> None:
    cases = [edited("attention.kv_heads", 3), edited("block_tokens", 1 << 50),
             edited("limits.max_mapping_bytes", 16 * GIB), edited("limits.min_rows", 10 ** 6),
             edited("limits.min_pages", 10 ** 6)]
    found = [only(c) for c in cases]
    assert [p.check for p in found] == ["tp_partition", "overflow", "max_mapping_bytes",
                                        "min_rows", "min_pages"]
    assert len({p.message for p in found}) == len(found)
    assert set(lay.CHECKS) >= {p.check for p in found}


@pytest.mark.parametrize("alignment", [3, 4095, 6144, 1000])
def test_an_alignment_that_is_not_a_power_of_two_is_refused(alignment: int) -> None:
    found = only(edited("limits.alignment", alignment))
    assert found.check == "alignment" and str(alignment) in found.message


@pytest.mark.parametrize("alignment", [1, 2, 4096, 2 ** 21])
def test_a_power_of_two_alignment_is_taken(alignment: int) -> None:
    assert problems(edited("limits.alignment", alignment)) == []


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    text = SEED.read_text().replace('"tp": 2,', '"tp": 2, "tp": 4,', 1)
    assert text != SEED.read_text()
    twice = tmp_path / "twice.json"
    twice.write_text(text)
    with pytest.raises(lay.LayoutError) as exc:
        lay.load(twice)
    (problem,) = exc.value.problems
    assert problem.check == "json" and '"tp" is given twice' in problem.message


def test_load_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(lay.LayoutError) as err:
        lay.load(bad)
    assert err.value.checks == ("json",) and str(err.value).startswith(f"{bad}: not JSON")
    with pytest.raises(lay.LayoutError) as err:
        lay.load(tmp_path / "absent.json")
    assert err.value.checks == ("file",) and "cannot read it" in str(err.value)
    bad.write_text(json.dumps(edited("tp", 3)))
    with pytest.raises(lay.LayoutError) as err:
        lay.records(lay.load(bad))
    assert err.value.checks == ("tp_partition", "tp_partition")  # kv_heads 4, state_heads 64


def test_budget_and_fraction_ranges() -> None:
    recs = lay.records(lay.load(SEED))
    with pytest.raises(lay.LayoutError) as err:
        lay.partition(recs, 0, Fraction(2))
    assert err.value.checks == ("budget", "row_fraction")
    with pytest.raises(lay.LayoutError) as err:
        lay.partition(recs, 1 << 63, Fraction(1, 4))
    assert err.value.checks == ("budget",)


def test_fraction_text_is_exact() -> None:
    assert lay.fraction("1/4") == lay.fraction("0.25") == Fraction(1, 4)
    assert lay.fraction_text(Fraction(1, 4)) == "0.25"
    assert lay.fraction_text(Fraction(1, 3)) == "1/3"
    with pytest.raises(ValueError, match=r"such as 0\.25"):
        lay.fraction("a quarter")


# -- properties ---------------------------------------------------------------------------------
TP = st.sampled_from([1, 2, 4, 8])


@st.composite
def layouts(draw: st.DrawFn, tp: int | None = None) -> lay.Layout:
    tp = draw(TP) if tp is None else tp
    small = st.integers(1, 512)
    per_rank = st.integers(1, 64)
    return lay.Layout(
        name="p", tp=tp, block_tokens=draw(st.integers(1, 4096)),
        attention={"layers": draw(small), "kv_heads": tp * draw(per_rank),
                   "head_dim": draw(small)},
        recurrent={"layers": draw(small), "state_heads": tp * draw(per_rank),
                   "state_key_dim": draw(small), "state_value_dim": draw(small),
                   "conv_channels": tp * draw(st.integers(1, 4096)),
                   "conv_kernel": draw(st.integers(1, 8))},
        dtype={"kv_bytes": draw(st.sampled_from([1, 2, 4])),
               "state_bytes": draw(st.sampled_from([1, 2, 4]))},
        limits={"alignment": draw(st.sampled_from([1, 512, 4096, 1 << 21])),
                "max_mapping_bytes": lay.INT64_MAX, "min_rows": 1, "min_pages": 1},
    )


def with_(layout: lay.Layout, **changes: Any) -> lay.Layout:
    fields = {k: copy.deepcopy(getattr(layout, k)) for k in lay.Layout.__slots__}
    fields.update(changes)
    return lay.Layout(**fields)


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_doubling_block_tokens_doubles_the_page_share_before_alignment(layout: lay.Layout) -> None:
    once = lay.records(layout)
    twice = lay.records(with_(layout, block_tokens=2 * layout.block_tokens))
    assert twice.page.bytes == 2 * once.page.bytes
    assert twice.row == once.row  # rows hold no tokens


@settings(max_examples=200, deadline=None)
@given(layouts(tp=1))
def test_tp_1_to_2_halves_each_share(layout: lay.Layout) -> None:
    # Heads and channels even, so TP2 divides them.
    even = with_(layout,
                 attention={**layout.attention, "kv_heads": 2 * layout.attention["kv_heads"]},
                 recurrent={**layout.recurrent,
                            "state_heads": 2 * layout.recurrent["state_heads"],
                            "conv_channels": 2 * layout.recurrent["conv_channels"]})
    one, two = lay.records(even), lay.records(with_(even, tp=2))
    assert 2 * two.page.bytes == one.page.bytes
    assert 2 * two.row.bytes == one.row.bytes


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_alignment_rounds_up_by_less_than_one_alignment(layout: lay.Layout) -> None:
    recs = lay.records(layout)
    align = layout.limits["alignment"]
    for share in (recs.page, recs.row):
        assert share.aligned % align == 0
        assert share.bytes <= share.aligned < share.bytes + align
    assert recs.page_record_bytes == layout.tp * recs.page.aligned


@settings(max_examples=300, deadline=None)
@given(layouts(), st.integers(1, lay.INT64_MAX), st.fractions(0, 1, max_denominator=10 ** 6))
def test_capacities_times_record_bytes_never_exceed_the_budget(
        layout: lay.Layout, budget: int, fraction: Fraction) -> None:
    recs = lay.records(layout)
    part = lay.partition(recs, budget, fraction)
    assert part.rows * recs.row_record_bytes + part.pages * recs.page_record_bytes <= budget
    assert part.rows * recs.row_record_bytes <= budget * fraction
    assert part.unused_bytes >= 0
    # whole records: one more page would not fit in what rows left
    assert budget - part.row_slab_bytes - part.page_slab_bytes < recs.page_record_bytes
