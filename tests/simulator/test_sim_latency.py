from __future__ import annotations

import random

import pytest

from simulator.clock import ManualClock
from simulator.engine import EngineConfig, SimulatedEngine
from simulator.latency import LatencyModel

EXACT = LatencyModel(noise=0.0)


def test_latency_is_prefill_plus_restore_copy_plus_decode() -> None:
    rng = random.Random(1)
    assert EXACT.seconds(40_000, 0, 0, rng) == pytest.approx(1.0)
    assert EXACT.seconds(0, 25 * 10**9, 0, rng) == pytest.approx(1.0)
    assert EXACT.seconds(0, 0, 32, rng) == pytest.approx(0.32)
    assert EXACT.seconds(4000, 10**9, 10, rng) == pytest.approx(0.1 + 0.04 + 0.1)


def test_noise_is_seeded_and_small() -> None:
    noisy = LatencyModel(noise=0.03)
    draws = [noisy.seconds(0, 0, 100, random.Random(7)) for _ in range(2)]
    assert draws[0] == draws[1]
    rng = random.Random(7)
    samples = [noisy.seconds(0, 0, 100, rng) for _ in range(2000)]
    assert len(set(samples)) == len(samples)
    mean = sum(samples) / len(samples)
    assert mean == pytest.approx(1.0, rel=0.005)
    assert all(0.85 < s < 1.15 for s in samples)  # 5 sigma


@pytest.mark.parametrize("kwargs", [{"prefill_tokens_per_s": 0}, {"host_bytes_per_s": -1},
                                    {"decode_seconds_per_token": -0.1}, {"noise": 2.0}])
def test_invalid_models_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LatencyModel(**kwargs)


def engine(**config: object) -> tuple[SimulatedEngine, ManualClock]:
    clock = ManualClock()
    return SimulatedEngine(EngineConfig(**config), clock=clock, seed=2), clock  # type: ignore[arg-type]


def finish(e: SimulatedEngine, clock: ManualClock, tokens: list[int], max_tokens: int) -> float:
    request = e.submit(tokens, max_tokens)
    clock.advance(request.finish_at - clock())
    e.poll()
    assert request.finished
    return request.latency_s


def test_a_host_hit_is_faster_by_the_prefill_it_saves_minus_the_copy() -> None:
    e, clock = engine(latency=EXACT, device_cache_slots=1)
    a = list(range(1000, 1000 + 64 * 40 + 1))  # 40 usable blocks
    miss = finish(e, clock, a, 16)
    assert miss == pytest.approx(len(a) / 40_000 + 0.16)
    finish(e, clock, list(range(200_000, 200_100)), 0)  # pushes a off the GPU
    hit = finish(e, clock, a, 16)
    restored = e.stats.tokens_restored
    assert restored == 40 * 64
    copied = 40 * (1 << 20) + (16 << 20)  # 40 pages and the checkpoint's row
    assert hit == pytest.approx((len(a) - restored) / 40_000 + copied / 25e9 + 0.16)
    assert hit < miss


def latency_sum(e: SimulatedEngine) -> float | None:
    return e.metrics.registry.get_sample_value(
        "helios:e2e_request_latency_seconds_sum", {"model_name": e.config.model_name}
    )


def test_time_scale_shortens_the_wait_but_not_the_recorded_latency() -> None:
    e, clock = engine(latency=EXACT, time_scale=100.0)
    request = e.submit(list(range(3100)), 32)
    assert request.finish_at - request.started_at == pytest.approx(request.latency_s / 100, abs=1e-6)
    clock.advance(request.finish_at - clock())
    e.poll()
    assert latency_sum(e) == pytest.approx(request.latency_s)
    assert request.latency_s == pytest.approx(3100 / 40_000 + 0.32)
    # Host stores complete on the scaled clock too (due within 30 ms / 100).
    assert e.stats.host_stores == e.config.stores_per_request


def test_a_request_cut_short_records_what_passed() -> None:
    e, clock = engine(latency=EXACT, time_scale=10.0)
    request = e.submit(list(range(3100)), 32)
    clock.advance(0.01)
    e.finish(request)
    assert latency_sum(e) == pytest.approx(0.1, abs=1e-5)


@pytest.mark.parametrize("kwargs", [{"time_scale": 0.0}, {"stores_per_request": 0},
                                    {"retired_memory": -1}])
def test_invalid_engine_configs_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        EngineConfig(**kwargs)  # type: ignore[arg-type]
