"""Pass-through counters and histograms stay counters while engine series come and go."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from exporter.cycle.passthrough_totals import Totals, fold
from exporter.sources import engine_metrics as passthrough
from tests.helpers import StubEngine, contract_example, make_sidecar

REQ = "helios_engine_native_requests_total"


def requests(series: dict[str, float]) -> str:
    return "\n".join(f'helios:requests_total{{request_id="{rid}"}} {v}' for rid, v in series.items())


def exported(totals: Totals) -> dict[str, float]:
    return {
        name + "".join(f"{{{k}={v}}}" for k, v in labels): value
        for fam in totals.families
        for name, labels, value in fam.samples
    }


def poll(prev: Totals | None, text: str, generation: str = "g-1", **kw: int) -> Totals:
    return fold(prev, passthrough.parse(text), generation, **kw)


def test_first_poll_exports_the_engine_sum() -> None:
    # Engine counters are cumulative since the incarnation started: what the sidecar first sees
    # was counted in this generation.
    t = poll(None, requests({"a": 3, "b": 4}))
    assert exported(t) == {REQ: 7.0}
    assert t.families[0].type == "counter"


def test_churning_series_keep_what_they_counted() -> None:
    # Series come and go (per-request ids), one resets (a restarted rank), one is absent for one
    # poll only; the export is the sum of every series' increases and never goes down.
    polls = [
        {"a": 1, "b": 1, "rank0": 10},
        {"b": 1, "c": 1, "rank0": 12},  # a vanished (keeps 1), c new (from 0 to 1)
        {"c": 1, "d": 1, "rank0": 3},  # rank0 reset: 3 is the increase
        {"c": 1, "d": 1, "e": 1, "rank0": 5},
        {"e": 1, "f": 2, "rank0": 6},  # f born and incremented between polls: counts 2
    ]
    truth = [12.0, 15.0, 19.0, 22.0, 25.0]  # a,b,c,d,e: 1 each; f: 2; rank0: 12 + 6
    t = None
    seen = []
    for series, expected in zip(polls, truth, strict=True):
        t = poll(t, requests(series))
        seen.append(exported(t)[REQ])
        assert seen[-1] == expected
    assert seen == sorted(seen)


def test_only_the_latest_window_of_request_series_is_visible() -> None:
    # The simulator keeps the last 50 request-id series: 262 requests served, 50 visible.
    t = None
    window: dict[str, float] = {}
    for i in range(262):
        window[f"r{i}"] = 1
        if len(window) > 50:
            del window[next(iter(window))]
        if i % 7 == 0 or i == 261:  # a poll every seven requests
            t = poll(t, requests(window))
    assert t is not None
    assert exported(t)[REQ] == 262.0
    assert sum(v for _, v in passthrough.parse(requests(window)).series["requests"].values()) == 50
    # Memory: the engine series of the last two polls, not all 262.
    assert len(t.last["requests"]) == 50 and len(t.before["requests"]) <= 50


def test_a_series_absent_for_one_poll_is_the_same_series() -> None:
    t = poll(None, requests({"rank0": 10, "rank1": 10}))
    t = poll(t, requests({"rank0": 11}))  # rank1 missing from one exposition
    t = poll(t, requests({"rank0": 12, "rank1": 13}))
    assert exported(t)[REQ] == 25.0  # 12 + 13, rank1's first 10 not counted twice
    t = poll(t, requests({"rank0": 13}))
    t = poll(t, requests({"rank0": 14}))
    t = poll(t, requests({"rank0": 15, "rank1": 2}))  # gone for two polls: a new series
    assert exported(t)[REQ] == 15 + 13 + 2


def test_a_new_generation_starts_over() -> None:
    t = poll(None, requests({"a": 5, "b": 5}), "g-1")
    t = poll(t, requests({"b": 9}), "g-1")
    assert exported(t)[REQ] == 14.0
    t = poll(t, requests({"b": 2}), "g-2")
    assert t.generation == "g-2" and exported(t)[REQ] == 2.0
    assert t.before == {}


def test_a_family_whose_series_all_vanished_keeps_its_total() -> None:
    t = poll(None, requests({"a": 5}))
    t = poll(t, "helios:num_running_reqs 3")
    assert exported(t)[REQ] == 5.0


def histogram(series: dict[str, tuple[float, float, float, float]]) -> str:
    """model -> (bucket le=1, bucket le=+Inf == count, sum)."""
    lines = []
    for model, (le1, inf, total, count) in series.items():
        name = "helios:e2e_request_latency_seconds"
        lines += [f'{name}_bucket{{model="{model}",le="1.0"}} {le1}',
                  f'{name}_bucket{{model="{model}",le="+Inf"}} {inf}',
                  f'{name}_sum{{model="{model}"}} {total}',
                  f'{name}_count{{model="{model}"}} {count}']
    return "\n".join(lines)


def test_histograms_fold_per_bucket() -> None:
    t = poll(None, histogram({"a": (1, 2, 1.5, 2), "b": (3, 3, 0.9, 3)}))
    t = poll(t, histogram({"b": (4, 5, 4.0, 5), "c": (1, 1, 0.25, 1)}))  # a gone, c new
    t = poll(t, histogram({"b": (1, 1, 0.5, 1), "c": (1, 1, 0.25, 1)}))  # b reset
    (fam,) = t.families
    assert fam.type == "histogram"
    got = {(name.rsplit("_", 1)[1], labels): v for name, labels, v in fam.samples}
    assert got == {
        ("bucket", (("le", "1.0"),)): 1 + 4 + 1 + 1,
        ("bucket", (("le", "+Inf"),)): 2 + 5 + 1 + 1,
        ("sum", ()): pytest.approx(1.5 + 4.0 + 0.25 + 0.5),
        ("count", ()): 2 + 5 + 1 + 1,
    }


def test_histogram_that_is_not_cumulative_is_left_out() -> None:
    text = "\n".join([
        'helios:e2e_request_latency_seconds_bucket{m="a",le="1"} 5',
        'helios:e2e_request_latency_seconds_bucket{m="a",le="+Inf"} 4',
        'helios:e2e_request_latency_seconds_count{m="a"} 4',
        'helios:e2e_request_latency_seconds_sum{m="a"} 1',
    ])
    t = poll(None, text)
    assert t.families == () and t.invalid == ("e2e_request_latency_seconds",)


def test_exported_samples_per_family_are_capped() -> None:
    text = "\n".join(
        f'helios:e2e_request_latency_seconds_bucket{{le="{i}"}} {i}' for i in range(1000)
    )
    t = poll(None, text, max_series_per_family=50)
    assert t.capped == {"e2e_request_latency_seconds": 950}
    assert len(t.totals["e2e_request_latency_seconds"]) == 50


def test_random_churn_matches_the_sum_of_increases() -> None:
    # Property: whatever the churn (births, deaths, resets), when every series is seen at every
    # poll of its life the export equals the sum of the increases Prometheus would compute, and
    # it never decreases.
    rng = random.Random(12)
    live: dict[str, float] = {}
    truth = 0.0
    t = None
    previous = 0.0
    for step in range(400):
        for name in list(live):
            r = rng.random()
            if r < 0.1:
                del live[name]
            elif r < 0.15 and live[name] >= 1:
                # Reset, counting from 0 again: seen below its last value (a reset that climbs
                # past the last value before the next poll is invisible, in Prometheus too).
                live[name] = float(rng.randint(0, int(live[name]) - 1))
                truth += live[name]
            else:
                inc = float(rng.randint(0, 5))
                live[name] += inc
                truth += inc
        for _ in range(rng.randint(0, 3)):
            name = f"s{step}-{rng.randint(0, 10**6)}"
            live[name] = float(rng.randint(0, 4))
            truth += live[name]
        t = poll(t, requests(live))
        value = exported(t).get(REQ, 0.0)
        assert value == truth
        assert value >= previous
        previous = value


def test_the_sidecar_folds_only_cycles_that_know_the_generation(tmp_path: Path) -> None:
    engine = StubEngine(contract_example())
    sidecar = make_sidecar(engine, tmp_path)
    seen: list[float | None] = []

    async def cycle(snapshot: dict[str, Any] | bytes, series: dict[str, float]) -> None:
        engine.snapshot, engine.metrics = snapshot, requests(series)
        await sidecar.loop.cycle()
        seen.append(sidecar.registry.get_sample_value(
            REQ, {"generation": snapshot["generation"]} if isinstance(snapshot, dict) else {}))

    async def run() -> None:
        g1, g2 = contract_example(), {**contract_example(), "generation": "g-2"}
        await cycle(g1, {"a": 1, "b": 1})
        await cycle(b"not json", {"b": 1, "c": 1})  # no generation: nothing exported or folded
        await cycle(g1, {"c": 1, "d": 1})  # a and b kept; c and d new
        await cycle(g2, {"x": 1})  # a restart: a new generation starts over
        await sidecar.client.aclose()

    asyncio.run(run())
    sidecar.close()
    assert seen == [2.0, None, 4.0, 1.0]
