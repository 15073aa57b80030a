"""The cardinality guard, in-process: no engine input exports more than a fixed number of series.

Snapshot series are bounded by closed label sets; pass-through series by
`--max-series-per-family` per allow-listed family, `le` values included, with the overflow counted
in `helios_exporter_engine_labels_dropped_total{family}`.
"""

from __future__ import annotations

import json

import pytest

from exporter.labels import MISS_REASONS
from exporter.snapshot.parse import parse_snapshot
from exporter.sources import engine_metrics as passthrough
from tests.hostile.fuzz.fuzzlib import (
    exported_families,
    first_poll,
    render_passthrough,
    render_snapshot,
)
from tests.hostile.stub import sane_snapshot
from tools.harness import families

GUARD = 25


def hostile_page(distinct: int) -> str:
    """Every allow-listed family with `distinct` label sets (and `le` values for histograms)."""
    lines = []
    for fam, typ in passthrough.DEFAULT_ALLOW.items():
        for i in range(distinct):
            labels = f'request_id="r{i}",model_name="m{i % 7}"'
            if typ == "histogram":
                lines.append(f'sglang:{fam}_bucket{{le="{i / 1000}",{labels}}} {i}')
            else:
                name = f"{fam}_total" if typ == "counter" else fam
                lines.append(f"sglang:{name}{{{labels}}} {i}")
    return "\n".join(lines)


@pytest.mark.parametrize("distinct", [1, GUARD - 2, GUARD, GUARD + 1, 5000])
def test_pass_through_never_exceeds_the_guard(distinct: int) -> None:
    parsed = passthrough.parse(hostile_page(distinct), max_series_per_family=GUARD)
    picture = first_poll(parsed, max_series=GUARD)
    for fam in exported_families(picture):
        assert len(fam.samples) <= GUARD
    out = render_passthrough(parsed, max_series=GUARD)
    samples = sum(len(f.samples) for f in families(out).values())
    assert samples <= GUARD * len(passthrough.DEFAULT_ALLOW)
    # Counters and gauges collapse onto one series; every dropped label is counted.
    for fam, typ in passthrough.DEFAULT_ALLOW.items():
        if typ != "histogram":
            assert picture.labels_dropped[fam] == 2 * distinct


@pytest.mark.parametrize("buckets", [GUARD - 2, GUARD - 1, 5000])
def test_le_values_count_against_the_same_guard(buckets: int) -> None:
    """A histogram with `buckets` finite buckets, +Inf, _sum and _count: `buckets + 3` series."""
    lines = [f'sglang:e2e_request_latency_seconds_bucket{{le="{i}"}} {i}' for i in range(buckets)]
    lines += [f'sglang:e2e_request_latency_seconds_bucket{{le="+Inf"}} {buckets}',
              "sglang:e2e_request_latency_seconds_sum 1",
              f"sglang:e2e_request_latency_seconds_count {buckets}"]
    parsed = passthrough.parse("\n".join(lines), max_series_per_family=GUARD)
    picture = first_poll(parsed, max_series=GUARD)
    over = buckets + 3 - GUARD
    if over <= 0:
        (fam,) = exported_families(picture)
        assert len(fam.samples) == buckets + 3
        assert picture.labels_dropped["e2e_request_latency_seconds"] == 0
    else:
        # Cut, it would no longer be a complete histogram: dropped whole, the overflow counted.
        assert exported_families(picture) == []
        assert picture.labels_dropped["e2e_request_latency_seconds"] == over
        assert picture.malformed_lines >= 1


def test_any_number_of_miss_keys_exports_seven_series() -> None:
    snap = sane_snapshot()
    snap["offload"]["lookups"]["misses"] = {f"reason-{i}:{i}": 1 for i in range(10000)}
    fams = families(render_snapshot(parse_snapshot(json.dumps(snap).encode())))
    misses = fams["helios_offload_lookup_misses"].samples
    assert sorted(s.labels["reason"] for s in misses) == sorted(MISS_REASONS)
    assert sum(s.value for s in misses) == 10000
    total = sum(len(f.samples) for f in fams.values())
    assert total < 60  # every snapshot series of one generation
