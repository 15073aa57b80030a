from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporter.collectors.passthrough import PassthroughCollector
from exporter.cycle.derive import EnginePicture, advance_engine
from exporter.cycle.passthrough_totals import fold
from exporter.snapshot.parse import snapshot_from_obj
from exporter.sources import engine_metrics as passthrough
from tests.conftest import REAL
from tests.helpers import promtool_check_metrics
from tools.harness import families as exposition_families

SGLANG = (REAL / "sglang_production_metrics.prom").read_text()


def render(parsed: passthrough.Parsed, generation: str = "g-1") -> bytes:
    """The exposition of the first poll of `generation`."""
    registry = CollectorRegistry()
    state = EnginePicture(passthrough=parsed, passthrough_generation=generation,
                          native=fold(None, parsed, generation))
    registry.register(PassthroughCollector(lambda: state))
    return generate_latest(registry)


def exported(parsed: passthrough.Parsed, **kw: int) -> dict[str, passthrough.Family]:
    """Gauges from this parse and counters/histograms folded at a generation's first poll."""
    return {f.name: f for f in [*parsed.families, *fold(None, parsed, "g-1", **kw).families]}


@pytest.mark.e2e
def test_real_sglang_output_goes_through_and_passes_promtool() -> None:
    parsed = passthrough.parse(SGLANG)
    names = set(exported(parsed))
    assert "helios_engine_native_prompt_tokens" in names
    assert "helios_engine_native_e2e_request_latency_seconds" in names
    assert parsed.malformed_lines == 0
    text = render(parsed)
    promtool_check_metrics(text)
    families = exposition_families(text)
    prompt = families["helios_engine_native_prompt_tokens"]
    assert prompt.type == "counter"
    assert [(s.labels, s.value) for s in prompt.samples] == [({"generation": "g-1"}, 8128902.0)]
    # The model path label is engine free text: it never reaches a label.
    assert b"meta-llama" not in text and b"sglang" not in text
    # Every exported engine series carries the generation.
    for fam in families.values():
        for sample in fam.samples:
            assert sample.labels["generation"] == "g-1"


def test_request_id_label_is_dropped_summed_and_counted() -> None:
    lines = ["# TYPE helios:requests_total counter"]
    lines += [f'helios:requests_total{{model_name="m",request_id="r{i}"}} 1' for i in range(20000)]
    parsed = passthrough.parse("\n".join(lines))
    (fam,) = exported(parsed).values()
    assert fam.samples == (("helios_engine_native_requests_total", (), 20000.0),)
    assert parsed.labels_dropped["requests"] == 40000  # model_name and request_id, per series


def test_not_allow_listed_families_are_skipped() -> None:
    parsed = passthrough.parse('process_cpu_seconds_total 3\nsglang:secret{x="y"} 1\n')
    assert parsed.families == [] and parsed.samples_seen == 0


def test_malformed_lines_are_counted_not_fatal() -> None:
    text = "\n".join([
        'helios:num_running_reqs{model_name="m"} 3',
        'helios:num_queue_reqs{model_name="m} 3',  # unterminated label value
        "helios:token_usage not-a-number",
        "helios:gen_throughput",
        '{model_name="m"} 1',
        "helios:prompt_tokens_total -5",  # negative counter
    ])
    parsed = passthrough.parse(text)
    assert list(exported(parsed)) == ["helios_engine_native_num_running_reqs"]
    assert parsed.malformed_lines == 5


def test_a_series_sent_twice_is_malformed_and_counted_once() -> None:
    parsed = passthrough.parse('helios:requests_total{a="1"} 3\nhelios:requests_total{a="1"} 4\n')
    assert parsed.malformed_lines == 1
    assert exported(parsed)["helios_engine_native_requests"].samples[0][2] == 3.0


def test_histogram_values_must_be_finite_counts() -> None:
    text = "\n".join([
        'helios:e2e_request_latency_seconds_bucket{le="+Inf"} 2',
        "helios:e2e_request_latency_seconds_count 2",
        "helios:e2e_request_latency_seconds_sum NaN",  # would poison the folded total
    ])
    parsed = passthrough.parse(text)
    assert parsed.malformed_lines == 1


@pytest.mark.e2e
def test_label_injection_cannot_escape() -> None:
    text = 'helios:num_running_reqs{model_name="a\\"} evil{x=\\"1",le="1"} 2\n'
    parsed = passthrough.parse(text)
    out = render(parsed)
    promtool_check_metrics(out)
    assert b"evil" not in out


def test_histogram_that_breaks_when_merged_is_dropped() -> None:
    text = "\n".join([
        'helios:e2e_request_latency_seconds_bucket{m="a",le="1"} 5',
        'helios:e2e_request_latency_seconds_bucket{m="a",le="+Inf"} 4',  # not cumulative
        'helios:e2e_request_latency_seconds_count{m="a"} 4',
        'helios:e2e_request_latency_seconds_sum{m="a"} 1',
    ])
    parsed = passthrough.parse(text)
    assert exported(parsed) == {}
    assert fold(None, parsed, "g-1").invalid == ("e2e_request_latency_seconds",)


def test_series_per_family_are_capped_and_counted() -> None:
    text = "\n".join(
        f'helios:e2e_request_latency_seconds_bucket{{le="{i}"}} {i}' for i in range(1000)
    )
    snap = snapshot_from_obj({"schema_version": 1, "generation": "g-1"})
    picture = advance_engine(EnginePicture(), snap, passthrough.parse(text), 50)
    assert picture.labels_dropped["e2e_request_latency_seconds"] == 950
    assert picture.native is not None
    assert len(picture.native.totals["e2e_request_latency_seconds"]) == 50


def test_series_cache_gives_the_same_result_across_polls() -> None:
    cache = passthrough.SeriesCache(max_bytes=30 * 300)
    later = SGLANG.replace("8.128902e+06", "8.2e+06")
    for text in (SGLANG, later, SGLANG, "helios:token_usage 0.5\nhelios:token_usage{ 1\n"):
        assert passthrough.parse(text, cache=cache) == passthrough.parse(text)
    first = exported(passthrough.parse(later, cache=cache))
    assert first["helios_engine_native_prompt_tokens"].samples[0][2] == 8.2e6  # values are
    # never cached, only labels


def test_series_cache_is_bounded_in_bytes_whatever_the_label_values() -> None:
    """Long label values that change every poll (the issue-32 engine grew the sidecar to
    505 MiB through an entry-capped cache): the cache's text stays under its byte bound."""
    cache = passthrough.SeriesCache(max_bytes=1 << 20)
    for poll in range(20):
        text = "\n".join(f'helios:prompt_tokens_total{{rid="{poll}-{i}-{"x" * 2000}"}} 1'
                         for i in range(300))
        parsed = passthrough.parse(text, cache=cache)
        assert parsed == passthrough.parse(text)
        assert cache.size <= cache.max_bytes
        held = sum(len(k) + cache.ENTRY_OVERHEAD for k in cache._entries)
        assert held == cache.size
    # A line longer than a 64th of the bound is parsed every time, never kept.
    passthrough.parse('helios:prompt_tokens_total{rid="' + "y" * 20000 + '"} 1', cache=cache)
    assert all("y" * 20000 not in k for k in cache._entries)


def test_engine_series_followed_are_bounded_all_families_together() -> None:
    cap = passthrough.MAX_ENGINE_SERIES
    text = "\n".join(f'helios:{fam}{{rid="{i}"}} 1' for i in range(cap // 2 + 100)
                     for fam in ("prompt_tokens_total", "generation_tokens_total"))
    parsed = passthrough.parse(text)
    assert sum(len(s) for s in parsed.series.values()) == cap
    assert sum(parsed.labels_dropped.values()) == (cap + 200) + 200  # every rid, then the rest


@pytest.mark.parametrize("bound", ["1e999", "-1e999", "Inf", "inf", "-Inf", "+inf", "Infinity",
                                   "NaN"])
def test_a_bound_that_is_not_finite_but_not_plus_inf_is_malformed(bound: str) -> None:
    """`le="1e999"` parses as infinite: it took the place of the `+Inf` bucket."""
    text = (f'helios:e2e_request_latency_seconds_bucket{{le="1"}} 1\n'
            f'helios:e2e_request_latency_seconds_bucket{{le="{bound}"}} 9\n'
            f'helios:e2e_request_latency_seconds_bucket{{le="+Inf"}} 2\n'
            f'helios:e2e_request_latency_seconds_count 2\n')
    parsed = passthrough.parse(text)
    assert parsed.malformed_lines == 1
    folded = fold(None, parsed, "g-1")
    assert folded.invalid == ()
    bucket = dict(folded.totals["e2e_request_latency_seconds"])
    assert bucket[("_bucket", (("le", "+Inf"),))] == 2


def test_ratio_gauges_are_averaged_when_series_collapse() -> None:
    text = ('helios:token_usage{tp_rank="0"} 0.5\nhelios:token_usage{tp_rank="1"} 0.7\n'
            'helios:num_running_reqs{tp_rank="0"} 3\nhelios:num_running_reqs{tp_rank="1"} 4\n')
    families = {f.name: f.samples for f in passthrough.parse(text).families}
    assert families["helios_engine_native_token_usage"][0][2] == 0.6
    assert families["helios_engine_native_num_running_reqs"][0][2] == 7.0
