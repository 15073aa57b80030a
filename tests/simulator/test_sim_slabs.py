from __future__ import annotations

import pytest

from simulator.slabs import GIB, MIB, Slab, SlabGeometry, SlabPool


def test_default_geometry_is_a_quarter_of_32_gib_for_rows() -> None:
    geometry = SlabGeometry()
    assert geometry.budget_bytes == 34359738368 == 32 * GIB
    assert geometry.row_record_bytes == 16 * MIB
    assert geometry.page_record_bytes == 1 * MIB
    assert geometry.row_capacity == 512
    assert geometry.page_capacity == 24576
    assert geometry.row_slab_bytes == 8 * GIB
    assert geometry.row_slab_bytes + geometry.page_capacity * MIB == geometry.budget_bytes


def test_geometry_is_configurable() -> None:
    geometry = SlabGeometry(budget_bytes=32 * GIB, row_fraction=0.5)
    assert (geometry.row_capacity, geometry.page_capacity) == (1024, 16384)
    geometry = SlabGeometry(budget_bytes=4 * GIB, row_record_bytes=32 * MIB, page_record_bytes=2 * MIB)
    assert (geometry.row_capacity, geometry.page_capacity) == (32, 1536)


def test_partial_records_are_not_counted() -> None:
    geometry = SlabGeometry(budget_bytes=100, row_fraction=0.25, row_record_bytes=10,
                            page_record_bytes=7)
    # 25 bytes of rows hold 2 whole rows; the remaining 80 bytes hold 11 pages.
    assert (geometry.row_capacity, geometry.page_capacity) == (2, 11)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"budget_bytes": 0},
        {"row_fraction": 0.0},
        {"row_fraction": 1.0},
        {"row_record_bytes": 0},
        {"page_record_bytes": -1},
        {"budget_bytes": 1 * MIB},  # not even one 16 MiB row
    ],
)
def test_invalid_geometry_is_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SlabGeometry(**kwargs)  # type: ignore[arg-type]


def test_allocate_and_release_track_free_counts() -> None:
    slab = Slab("row", 3, 16)
    assert (slab.free, slab.used, slab.used_bytes) == (3, 0, 0)
    a, b = slab.allocate(), slab.allocate()
    assert (a, b) == (0, 1)
    assert (slab.free, slab.used, slab.used_bytes) == (1, 2, 32)
    slab.release(a)
    assert slab.free == 2
    assert not slab.is_allocated(a)
    with pytest.raises(ValueError):
        slab.release(a)
    slab.allocate()
    slab.allocate()
    with pytest.raises(Exception, match="exhausted"):
        slab.allocate()
    assert slab.snapshot() == {"capacity": 3, "free": 0, "record_bytes": 16}


def test_pool_reports_bytes_and_page_headroom() -> None:
    pool = SlabPool()
    pool.row.allocate()
    pool.page.allocate()
    assert pool.used_bytes == 17 * MIB
    assert pool.page_free_ratio() == pytest.approx(24575 / 24576)
