"""The pure parts: verdict rules, quantiles, captures as JSON, corpora and the probe's plan."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from exporter.labels import MISS_REASONS
from exporter.phases import capture as cap
from exporter.phases.book import decode, encode, phase_json
from exporter.phases.deltas import deltas, problems
from lab.evidence.arithmetic import quantile, verdict
from lab.evidence.doc import judge, parse_pair
from lab.probe.corpus import CorpusError, read_corpus
from lab.probe.passes import parse_orders, plan
from tests.lab.evidence_builder import probe_pair


def capture(generation: str = "g-1", **counters: int) -> cap.Capture:
    base = {"lookups.total": 0, "lookups.hits": 0, "lookups.misses.evicted": 0,
            "evictions.row.attempts": 0}
    base.update({k.replace("__", "."): v for k, v in counters.items()})
    return cap.Capture(at=1.0, generation=generation, counters=base,
                       slabs={"page": {"capacity": 100, "free": 80, "record_bytes": 1}},
                       headroom_total=3, requests=2.0,
                       latency=cap.Histogram(2.0, 0.7, ((0.3, 1.0), (0.4, 2.0), (math.inf, 2.0))))


@pytest.mark.parametrize(("replay", "orders", "expected"), [
    ({"hits": 1, "misses": {"key_mismatch": 51}}, ("forward", "reverse"), "order_sensitive"),
    ({"hits": 1, "misses": {"key_mismatch": 51}}, ("forward", "forward"), "reuse"),
    ({"hits": 12, "misses": {}}, (None, None), "reuse"),
    ({"hits": 12, "misses": {}}, ("forward", None), "reuse"),
    ({"hits": 0, "misses": {"key_mismatch": 1, "evicted": 51}}, ("forward", "reverse"),
     "incompatible_keys"),
    ({"hits": 0, "misses": {"no_checkpoint": 3}}, (None, None), "incompatible_keys"),
    ({"hits": 0, "misses": {"evicted": 52}}, ("forward", "reverse"), "no_reuse"),
    ({"hits": 0, "misses": {"no_prefix": 52}}, (None, None), "no_reuse"),
    ({"hits": None, "misses": {}}, (None, None), "no_reuse"),
])
def test_verdict_rules(replay: dict[str, Any], orders: tuple[str | None, str | None],
                       expected: str) -> None:
    # hits are order sensitivity only when the replay ran in another order than the prime
    assert verdict(replay, *orders) == expected


def test_deltas_between_captures() -> None:
    a = capture()
    b = cap.Capture(at=5.0, generation="g-1",
                    counters={"lookups.total": 52, "lookups.hits": 43,
                              "lookups.misses.evicted": 9, "evictions.row.attempts": 112},
                    headroom_total=115, requests=54.0,
                    latency=cap.Histogram(54.0, 18.7, ((0.3, 10.0), (0.4, 54.0),
                                                       (math.inf, 54.0))))
    d = deltas(a, b)
    assert (d["lookups"], d["hits"], d["misses"], d["row_pressure_attempts"]) == (
        52, 43, {"evicted": 9}, 112)
    assert d["row_pressure_with_page_headroom"] == 112
    assert d["requests"] == 52
    assert d["e2e_latency_seconds"] == {"count": 52.0, "sum": pytest.approx(18.0),
                                        "buckets": [["0.3", 9.0], ["0.4", 52.0], ["+Inf", 52.0]]}
    assert d["host_stores"] is None  # absent from the snapshot: unknown, not 0
    assert problems(a, b) == []


V3_DELTAS = ("stores_dropped_full", "stores_dropped_ineligible", "stores_failed",
             "prompt_tokens_computed", "prompt_tokens_gpu_prefix", "prompt_tokens_host_restored")


def v3_counters(full: int, failed: int, evicted_tokens: int) -> dict[str, int]:
    """Schema 3's counters as exporter.cycle.derive.offload_counters keys them (reasons zero-filled)."""
    blocked = {f"lookups__blocked_tokens__{r}": 0 for r in MISS_REASONS}
    return {**blocked, "lookups__blocked_tokens__evicted": evicted_tokens,
            "host__store_outcomes__stored": 40, "host__store_outcomes__dropped_full": full,
            "host__store_outcomes__dropped_ineligible": 3, "host__store_outcomes__failed": failed,
            "prompt_tokens__computed": 9000 + evicted_tokens, "prompt_tokens__gpu_prefix": 90,
            "prompt_tokens__host_restored": 2 * full}


def test_v3_deltas_drops_blocked_tokens_and_prompt_sources() -> None:
    d = deltas(capture(**v3_counters(full=2, failed=0, evicted_tokens=100)),
               capture(**v3_counters(full=9, failed=1, evicted_tokens=3191)))
    assert (d["stores_dropped_full"], d["stores_dropped_ineligible"], d["stores_failed"]) == (
        7, 0, 1)
    assert d["blocked_tokens"] == {**dict.fromkeys(MISS_REASONS, 0), "evicted": 3091}
    assert (d["prompt_tokens_computed"], d["prompt_tokens_gpu_prefix"],
            d["prompt_tokens_host_restored"]) == (3091, 0, 14)
    assert json.loads(json.dumps(d)) == d


def test_v1_deltas_of_schema_3_are_unknown_never_0() -> None:
    d = deltas(capture(), capture())  # a schema 1 engine: none of schema 3's counters
    assert {k: d[k] for k in (*V3_DELTAS, "blocked_tokens")} == dict.fromkeys(
        (*V3_DELTAS, "blocked_tokens"), None)
    assert json.dumps(d["blocked_tokens"]) == "null"
    # one capture without the section (a broken section is left out): unknown too
    d = deltas(capture(), capture(**v3_counters(full=9, failed=1, evicted_tokens=3191)))
    assert d["stores_dropped_full"] is None and d["blocked_tokens"] is None


def test_problems_name_a_restart_and_a_decrease() -> None:
    assert "generation changed from g-1 to g-2" in problems(capture(), capture("g-2"))[0]
    went_down = problems(capture(lookups__total=5), capture(lookups__total=4))
    assert went_down == ["engine counters decreased within one generation: lookups.total"]


# Rank q x 4 among ((0.3, 1), (0.4, 3), (0.5, 4), (+Inf, 4)), linear within its bucket: q=0.5 is
# rank 2, the middle of (0.3, 0.4]; q=0.95 is rank 3.8, 80 % into (0.4, 0.5].
@pytest.mark.parametrize(("q", "expected"), [(0.25, 0.3), (0.5, 0.35), (0.95, 0.48), (1.0, 0.5)])
def test_quantile_interpolates_like_histogram_quantile(q: float, expected: float) -> None:
    buckets = ((0.3, 1.0), (0.4, 3.0), (0.5, 4.0), (math.inf, 4.0))
    assert quantile(q, buckets) == pytest.approx(expected)


def test_quantile_without_data_or_in_the_inf_bucket() -> None:
    assert quantile(0.5, ()) is None
    assert quantile(0.5, ((0.3, 0.0), (math.inf, 0.0))) is None
    assert quantile(0.99, ((0.3, 1.0), (math.inf, 10.0))) == 0.3


def test_captures_survive_the_state_file_round_trip() -> None:
    from exporter.phases.book import Phase

    phases = (Phase("a/1", capture(), capture(lookups__total=4), "why", None),
              Phase("a/2", capture()))
    assert decode(encode(phases)) == phases
    shown = phase_json(phases[0])
    json.dumps(shown, allow_nan=False)  # +Inf travels as text
    assert shown["end"]["e2e_latency_seconds"]["buckets"][-1] == ["+Inf", 2.0]


@pytest.mark.parametrize("doc", [
    {"format": 2, "phases": []},
    {"format": 1, "phases": {}},
    {"format": 1, "phases": [{"name": "a", "begin": {"at": "x", "generation": "g"}}]},
    {"format": 1, "phases": [{"name": "a", "begin": {"at": 1, "generation": "g",
                                                       "counters": {"x": -1}}}]},
    {"format": 1, "phases": [{"name": "a", "begin": {"at": 1, "generation": "g"}}] * 2},
])
def test_a_malformed_state_file_is_refused(doc: dict[str, Any]) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        decode(json.dumps(doc).encode())


def test_judge_refuses_what_cannot_be_judged() -> None:
    phases, passes = probe_pair()
    prime, replay = "p/forward-1", "p/reverse-2"
    assert judge(phases, prime, replay, passes)["verdict"] == "order_sensitive"
    assert "not found" in judge(phases, prime, "x", passes)["why"]
    opened = {**phases, replay: {**phases[replay], "state": "open"}}
    assert "has not ended" in judge(opened, prime, replay, passes)["why"]
    bad = {**phases, prime: {**phases[prime], "valid": False, "invalid_reasons": ["restarted"]}}
    assert "restarted" in judge(bad, prime, replay, passes)["why"]
    other = {**phases, replay: {**phases[replay], "generation": "g-2"}}
    assert "different generations" in judge(other, prime, replay, passes)["why"]


@pytest.mark.parametrize(("deltas", "why"), [
    ({"hits": 0, "lookups": 0, "requests": 0}, "saw 0 lookups and 0 finished requests"),
    ({"hits": 0, "lookups": 0, "requests": None}, "saw 0 lookups and no finished requests"),
    ({"hits": 0, "lookups": 12, "requests": 0}, "saw 12 lookups and 0 finished requests"),
    ({"hits": 0, "lookups": None, "requests": 12}, "reported no lookup counters"),
])
def test_a_phase_that_measured_nothing_is_invalid_not_no_reuse(deltas: dict[str, Any],
                                                                why: str) -> None:
    phases, _ = probe_pair()
    replay = phases["p/reverse-2"]
    replay["deltas"] = {**replay["deltas"], **deltas}
    judged = judge(phases, "p/forward-1", "p/reverse-2")
    assert judged["verdict"] == "invalid"
    assert why in judged["why"] and "replay phase 'p/reverse-2'" in judged["why"]


def test_a_pass_with_failed_requests_is_invalid() -> None:
    phases, passes = probe_pair()
    passes["p/reverse-2"]["failed"] = 1
    judged = judge(phases, "p/forward-1", "p/reverse-2", passes)
    assert judged["verdict"] == "invalid"
    assert "1 of 52 requests of the replay pass 'p/reverse-2' failed" in judged["why"]
    passes["p/reverse-2"]["failed"] = 0
    assert judge(phases, "p/forward-1", "p/reverse-2", passes)["verdict"] == "order_sensitive"


def test_counters_that_contradict_each_other_void_a_verdict() -> None:
    phases, passes = probe_pair()
    phases["p/reverse-2"]["deltas"]["host_tokens_restored"] = 10 ** 7
    judged = judge(phases, "p/forward-1", "p/reverse-2", passes)
    assert judged["verdict"] == "invalid"
    assert ("the replay phase 'p/reverse-2': 10,000,000 host tokens restored above 86,468 "
            "prompt tokens reused") in judged["why"]


@pytest.mark.parametrize(("orders", "hits", "verdict_", "headline"), [
    (("forward", "reverse"), 43, "order_sensitive", "order_sensitive: the reverse replay hit"),
    (("forward", "forward"), 12, "reuse", "reuse (same order): not order sensitivity"),
    (("forward", "forward"), 0, "no_reuse", "no_reuse"),
])
def test_headlines_say_what_a_verdict_means(orders: tuple[str, str], hits: int, verdict_: str,
                                            headline: str) -> None:
    from lab.evidence.doc import headline as headline_of

    phases, passes = probe_pair(orders=orders, hits=hits)
    judged = judge(phases, *phases, passes)
    assert judged["verdict"] == verdict_
    assert judged["orders"] == list(orders)
    assert headline_of(judged) == headline


def test_without_a_record_the_order_comes_from_the_names() -> None:
    phases, _ = probe_pair(orders=("forward", "forward"), hits=12)
    assert judge(phases, "p/forward-1", "p/forward-2")["orders"] == ["forward", "forward"]
    renamed = {"warm/1": {**phases["p/forward-1"], "name": "warm/1"},
               "warm/2": {**phases["p/forward-2"], "name": "warm/2"}}
    judged = judge(renamed, "warm/1", "warm/2")
    assert judged["orders"] == [None, None] and judged["verdict"] == "reuse"
    assert "the orders are not known" in judged["reading"]


@pytest.mark.parametrize("text", ["a", "a:", ":b", "a:b:c"])
def test_probe_pairs_need_two_names(text: str) -> None:
    with pytest.raises(ValueError, match="PRIME:REPLAY"):
        parse_pair(text)


def test_corpus_lines_are_kept_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"prompt": "a",  "max_tokens": 1}\r\n\n{"prompt":"b"}')
    corpus = read_corpus(path)
    assert corpus.bodies == (b'{"prompt": "a",  "max_tokens": 1}', b'{"prompt":"b"}')


@pytest.mark.parametrize(("content", "message"), [
    (b"", "no bodies"), (b'{"a": 1}\nnot json\n', ":2: not JSON"), (b"[1]\n", ":1: a body must"),
])
def test_a_bad_corpus_is_refused_before_anything_is_sent(tmp_path: Path, content: bytes,
                                                         message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        read_corpus(path)


def test_plan_names_each_pass(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"prompt": "a", "max_tokens": 4, "min_tokens": 4}\n')
    corpus = read_corpus(path)
    probe = plan("lane", parse_orders("forward,reverse"), 0, corpus)
    assert [(p.phase, p.prime) for p in probe] == [("lane/forward-1", True),
                                                   ("lane/reverse-2", False)]
    # each repetition on its own incarnation: a prime, then the measured pass LANE/r
    reps = plan("lane", parse_orders("forward,forward"), 3, corpus)
    assert [(p.phase, p.repetition, p.prime) for p in reps] == [
        ("lane/1/forward-1", 1, True), ("lane/1", 1, False),
        ("lane/2/forward-1", 2, True), ("lane/2", 2, False),
        ("lane/3/forward-1", 3, True), ("lane/3", 3, False)]
    cold = plan("lane", ["forward"], 2, corpus)
    assert [(p.phase, p.prime) for p in cold] == [("lane/1", True), ("lane/2", True)]
    with pytest.raises(ValueError, match="--order"):
        parse_orders("forward,sideways")


@pytest.mark.parametrize(("body", "fixed"), [
    ({"max_tokens": 32, "min_tokens": 32}, 32),
    ({"max_tokens": 32, "ignore_eos": True}, 32),
    ({"max_tokens": 32}, None),
    ({"max_tokens": 32, "min_tokens": 8}, None),
    ({"max_tokens": 32, "ignore_eos": "yes"}, None),
    ({"min_tokens": 32, "ignore_eos": True}, None),
    ({"max_tokens": True, "ignore_eos": True}, None),
])
def test_a_body_fixes_its_output_length_or_is_refused(tmp_path: Path, body: dict[str, Any],
                                                      fixed: int | None) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"prompt": [1, 2, 3], **body}) + "\n")
    corpus = read_corpus(path)
    assert corpus.expected == (fixed,)
    if fixed is None:
        with pytest.raises(CorpusError, match=r"c\.jsonl:1: the body does not fix its output "
                           "length"):
            corpus.require_fixed_lengths()
    else:
        corpus.require_fixed_lengths()
