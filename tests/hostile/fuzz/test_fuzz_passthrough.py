"""Fuzz the engine `/metrics` pass-through: arbitrary text, and exposition-like text built from
random vendor prefixes, family names, labels and values. `passthrough.parse` never raises; the
re-exported families parse back, carry only `generation` (and a histogram bucket's `le`), and no
family exceeds the cardinality guard."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from exporter.cycle.passthrough_totals import fold
from exporter.sources import engine_metrics as passthrough
from tests.helpers import promtool_check_metrics
from tests.hostile.fuzz.fuzzlib import (
    FUZZ,
    PROMTOOL_SAMPLE,
    exported_families,
    first_poll,
    render_passthrough,
)
from tools.harness import families

FAMILIES = sorted(passthrough.DEFAULT_ALLOW)
NAME = st.one_of(
    st.sampled_from(FAMILIES),
    st.sampled_from(["process_cpu_seconds", "requests_totalx", "", "le", "helios_fake"]),
    st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True),
)
SUFFIX = st.sampled_from(["", "_total", "_bucket", "_sum", "_count", "_created", "_info"])
PREFIX = st.sampled_from(["helios:", "sglang:", "vllm:", "", "a:b:", ":", "ZQXJ:"])
LABEL_NAME = st.one_of(st.sampled_from(["le", "model_name", "request_id", "quantile", "le "]),
                       st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True))
LABEL_VALUE = st.one_of(
    st.sampled_from(["0.1", "1", "1.0", "+Inf", "Inf", "-Inf", "NaN", "1e400", "-0", "0x10",
                     "1_0", "", "ZQXJ", 'ZQXJ\\"} 1', "ZQXJ\\n", "ZQXJ\\\\"]),
    st.floats(allow_nan=True).map(repr),
    st.text(alphabet=st.characters(blacklist_characters='"\\\n'), max_size=12),
)
VALUE = st.one_of(
    st.sampled_from(["1", "0", "-1", "NaN", "+Inf", "-Inf", "1e400", "-1e400", "1_000", "0x1",
                     "abc", "", "1 1764389520000", "1 2 3", "3.5e-7"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(2**70), 2**70).map(str),
)


@st.composite
def sample_line(draw: st.DrawFn) -> str:
    name = draw(PREFIX) + draw(NAME) + draw(SUFFIX)
    labels = draw(st.lists(st.tuples(LABEL_NAME, LABEL_VALUE), max_size=3))
    body = ",".join(f'{k}="{v}"' for k, v in labels)
    brace = draw(st.sampled_from(["{%s}", "{%s", "%s}", "{%s,}", "{ %s }"])) if labels else ""
    return f"{name}{brace % body if brace else ''} {draw(VALUE)}"


HISTOGRAMS = sorted(f for f, t in passthrough.DEFAULT_ALLOW.items() if t == "histogram")
LE = st.sampled_from(["0.005", "0.01", "0.1", "0.5", "1", "2.5", "10", "1e3", "60"])
DEFECTS = ("none", "none", "none", "no_inf", "falls", "count_off", "nan_le", "dup_le",
           "inf_le", "negative_le")


@st.composite
def histogram_block(draw: st.DrawFn) -> list[str]:
    """A histogram split over request ids, cumulative and complete, or with one defect: no +Inf
    bucket, a bucket that falls, `_count` that disagrees, a NaN / 1e400 / negative `le`, one `le`
    written two ways."""
    fam = draw(st.sampled_from(HISTOGRAMS))
    vendor = draw(st.sampled_from(["sglang:", "helios:"]))
    defect = draw(st.sampled_from(DEFECTS))
    les = sorted(set(draw(st.lists(LE, min_size=1, max_size=6))), key=float)
    les.append("+Inf")
    extra = {"nan_le": "NaN", "inf_le": "1e400", "negative_le": "-1", "dup_le": "1.0"}
    lines = []
    for rid in range(draw(st.integers(1, 3))):
        running = 0
        for i, le in enumerate(les):
            step = draw(st.integers(0, 5))
            if defect == "falls" and i == len(les) - 2:
                step = -running - 1
            running += step
            if not (defect == "no_inf" and le == "+Inf"):
                lines.append(f'{vendor}{fam}_bucket{{le="{le}",request_id="r{rid}"}} {running}')
        if defect in extra:
            lines.append(f'{vendor}{fam}_bucket{{le="{extra[defect]}",request_id="r{rid}"}} '
                         f"{draw(st.integers(0, running))}")
        count = running + (1 if defect == "count_off" else 0)
        lines.append(f'{vendor}{fam}_count{{request_id="r{rid}"}} {count}')
        lines.append(f'{vendor}{fam}_sum{{request_id="r{rid}"}} {draw(VALUE)}')
    return draw(st.permutations(lines)) if draw(st.booleans()) else lines


@st.composite
def exposition(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.one_of(
        sample_line(), sample_line(), sample_line(),
        histogram_block().map("\n".join),
        st.builds(lambda n, t: f"# TYPE {n} {t}", NAME, st.sampled_from(
            ["counter", "gauge", "histogram", "summary", "untyped", "bogus"])),
        st.builds(lambda n, h: f"# HELP {n} {h}", NAME, st.text(max_size=20)),
        st.text(max_size=30),
    ), max_size=40))
    return draw(st.sampled_from(["\n", "\r\n"])).join(lines)


def check(text: str, max_series: int) -> bytes:
    parsed = passthrough.parse(text, max_series_per_family=max_series)
    assert parsed.malformed_lines >= 0 and parsed.samples_seen >= 0
    assert set(parsed.labels_dropped) <= set(FAMILIES)
    picture = first_poll(parsed, max_series=max_series)
    assert set(picture.labels_dropped) <= set(FAMILIES)
    out = render_passthrough(parsed, max_series=max_series)
    fams = families(out)
    assert "ZQXJ" not in out.decode()
    for fam in exported_families(picture):
        assert fam.name.removeprefix(passthrough.EXPORT_PREFIX) in FAMILIES
        assert len(fam.samples) <= max_series, (fam.name, len(fam.samples))
    for fam in fams.values():
        for s in fam.samples:
            assert set(s.labels) <= {"generation", "le"}, s
            assert s.labels["generation"] == "g-fuzz"
            if "le" in s.labels:
                assert s.name.endswith("_bucket")
                le = s.labels["le"]
                # No bucket boundary is NaN, and the only infinite one is the +Inf bucket (an
                # engine's `1e400` once took its place).
                assert le == "+Inf" or math.isfinite(float(le)), s
            if fam.type == "counter":
                assert 0 <= s.value < math.inf, s  # a counter is a finite count, never NaN
    return out


@FUZZ
@given(st.text(max_size=2000), st.integers(1, 300))
def test_arbitrary_text_never_raises(text: str, max_series: int) -> None:
    check(text, max_series)


@FUZZ
@given(exposition(), st.integers(1, 30))
@example("helios:prompt_tokens_total NaN\nsglang:requests nan\nvllm:generation_tokens -0", 5)
@example('sglang:e2e_request_latency_seconds_bucket{le="NaN"} 0\n'
         'sglang:e2e_request_latency_seconds_bucket{le="+Inf"} 0\n'
         "sglang:e2e_request_latency_seconds_count 0", 5)
def test_exposition_like_text_is_filtered_bounded_and_valid(text: str, max_series: int) -> None:
    check(text, max_series)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(FAMILIES), LABEL_VALUE, VALUE), max_size=60),
       st.integers(1, 20))
def test_one_family_many_label_values_stays_under_the_guard(
    series: list[tuple[str, str, str]], max_series: int
) -> None:
    text = "\n".join(f'sglang:{fam}_bucket{{le="{le}",request_id="{le}"}} {value}'
                     for fam, le, value in series)
    check(text, max_series)


@FUZZ
@given(st.lists(histogram_block(), min_size=1, max_size=3), st.integers(5, 100))
def test_histograms_are_re_exported_only_when_still_valid(
    blocks: list[list[str]], max_series: int
) -> None:
    check("\n".join(line for block in blocks for line in block), max_series)


@pytest.mark.e2e
@PROMTOOL_SAMPLE
@given(exposition())
def test_promtool_accepts_a_sample_of_pass_through_output(text: str) -> None:
    promtool_check_metrics(check(text, 20))


@FUZZ
@given(st.lists(exposition(), min_size=2, max_size=4), st.integers(1, 30))
def test_folded_counters_never_decrease_within_a_generation(
    texts: list[str], max_series: int
) -> None:
    """Whatever series come, go, reset or repeat from one poll to the next, every exported
    counter and histogram sample stays finite and never goes down within a generation."""
    totals = None
    before: dict[tuple[str, passthrough.Key], float] = {}
    for text in texts:
        parsed = passthrough.parse(text, max_series_per_family=max_series)
        totals = fold(totals, parsed, "g-fuzz", max_series_per_family=max_series)
        now = {(fam, key): v for fam, acc in totals.totals.items() for key, v in acc.items()}
        assert all(0 <= v < math.inf for v in now.values())
        assert all(now[k] >= v for k, v in before.items())
        before = now
