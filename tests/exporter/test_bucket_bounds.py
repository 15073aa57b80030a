"""One check of a histogram bucket's bound (exporter/bucket_bounds.py) on both paths that read
one: the engine's /metrics text (`le="..."`) and a schema-3 snapshot histogram's bucket keys.
Whatever the bound, both paths refuse it alike, and a refused one never changes what is
exported as the `+Inf` bucket or the count."""

from __future__ import annotations

import copy
import math
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.bucket_bounds import bucket_bound
from exporter.cycle.passthrough_totals import fold
from exporter.snapshot.parse import snapshot_from_obj
from exporter.sources import engine_metrics as passthrough
from tests.exporter.snapshot.test_v3_read import exposition, load

# The schema's pattern for a bucket key (exporter/snapshot/source.py): what a JSON key may be.
SCHEMA_KEY = r"\A(\+Inf|(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)\Z"
SPELLINGS = ("1e999", "9E400", "0.5e309", "+Inf", "-Inf", "Inf", "inf", "+inf", "Infinity",
             "NaN", "nan", "-1e999", "1_0", " 1", "0x10", "", "1.5", "0", "1e-999")
BOUNDS = st.one_of(st.sampled_from(SPELLINGS), st.from_regex(SCHEMA_KEY),
                   st.floats(allow_nan=False, allow_infinity=False).map(repr))
EXAMPLE = {1.0: 0, 10.0: 2, 60.0: 25, 600.0: 31, math.inf: 31}  # its bounds and counts
HISTOGRAM = ("offload", "evictions", "row", "age_seconds")


def _json_path(key: str, count: float) -> tuple[bool, float | None, float | None]:
    """(the histogram dropped, its exported +Inf bucket, its exported count) with bucket `key`
    added at `count` to the contract example's row age histogram (count 31)."""
    obj = load("contract_example_v3.json")
    hist = obj
    for part in HISTOGRAM:
        hist = hist[part]
    hist["buckets"][key] = count
    snap = snapshot_from_obj(copy.deepcopy(obj))
    dropped = ".".join(HISTOGRAM) in snap.dropped_fields
    got = exposition(obj)
    row = (("pressure", "row"),)
    inf = got.get("helios_offload_eviction_age_seconds_bucket", {}).get(
        (("le", "+Inf"), ("pressure", "row")))
    return dropped, inf, got.get("helios_offload_eviction_age_seconds_count", {}).get(row)


def _text_path(key: str, count: float) -> tuple[bool, float | None]:
    """(the line refused as malformed, the folded +Inf bucket) of an engine histogram with a
    bucket `key` at `count` beside `+Inf` (2, the count)."""
    text = ('helios:e2e_request_latency_seconds_bucket{le="1"} 1\n'
            f'helios:e2e_request_latency_seconds_bucket{{le="{key}"}} {count}\n'
            'helios:e2e_request_latency_seconds_bucket{le="+Inf"} 2\n'
            'helios:e2e_request_latency_seconds_count 2\n'
            'helios:e2e_request_latency_seconds_sum 3\n')
    parsed = passthrough.parse(text)
    totals: dict[Any, float] = dict(
        fold(None, parsed, "g-1").totals.get("e2e_request_latency_seconds", ()))
    return parsed.malformed_lines == 1, totals.get(("_bucket", (("le", "+Inf"),)))


def test_the_issue_example_a_1e999_key_does_not_override_the_count() -> None:
    dropped, inf, count = _json_path("1e999", 40)
    assert dropped and inf is None and count is None  # left out, never 40 instead of 31
    assert _text_path("1e999", 40)[0]


@settings(max_examples=300, deadline=None)
@given(key=BOUNDS, extra=st.integers(0, 50))
def test_both_paths_refuse_the_same_bounds(key: str, extra: int) -> None:
    bound = bucket_bound(key)
    refused = bound is None
    assert refused == (not (bound is not None and (math.isfinite(bound) or key == "+Inf")))
    # Text: a refused bound makes its line malformed; +Inf stays the engine's own 2. (A bound
    # equal to one the histogram has is another rule's case: a duplicate series.)
    plain = not any(c in key for c in '"\\\n')
    if key != "+Inf" and bound not in (1.0, math.inf) and plain:
        malformed, inf = _text_path(key, 2 + extra)
        assert malformed == refused, key
        if refused:
            assert inf == 2
    # JSON: only keys the schema admits reach the histogram rule (others break the schema,
    # and are left out with the whole histogram before it).
    if key != "+Inf" and bound not in EXAMPLE and re.match(SCHEMA_KEY, key):
        count = 31 + extra if refused else _cumulative_at(bound)
        dropped, inf, exported = _json_path(key, count)
        assert dropped == refused, key
        if not refused:
            assert inf == exported == 31  # the count and +Inf the engine sent


def _cumulative_at(bound: float | None) -> float:
    """A count for a finite bound that keeps the example's buckets cumulative."""
    assert bound is not None
    buckets = EXAMPLE
    return min(n for b, n in buckets.items() if b >= bound) if bound < 1.0 else max(
        n for b, n in buckets.items() if b <= bound)
