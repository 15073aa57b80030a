"""The interval observer-cost reports, and the order it runs in: pure, no processes."""

from __future__ import annotations

import math
import random
import re

import pytest

from exporter.experiment.observer_cost_plan import blocked, draw, parse_concurrency, plan
from exporter.experiment.observer_cost_stats import (
    Spread,
    betainc,
    difference,
    percentile,
    t_cdf,
    t_quantile,
)
from exporter.labels import PHASE_NAME_PATTERN

# Student's t, 97.5 % quantiles, from any printed table.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 10: 2.228, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize(("df", "expected"), sorted(T_975.items()))
def test_t_quantile_matches_the_table(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=6e-4)


def test_t_distribution_at_fractional_degrees_and_the_beta_function() -> None:
    assert t_cdf(0.0, 3.3) == pytest.approx(0.5)
    assert t_cdf(t_quantile(0.9, 2.5), 2.5) == pytest.approx(0.9, abs=1e-9)
    # I_x(1, 1) = x and I_x(a, b) = 1 - I_(1-x)(b, a).
    assert betainc(1, 1, 0.3) == pytest.approx(0.3)
    assert betainc(2.5, 0.5, 0.7) == pytest.approx(1 - betainc(0.5, 2.5, 0.3))
    with pytest.raises(ValueError):
        t_quantile(0.4, 3)


def arms(rng: random.Random, effect: float, sd_on: float, sd_off: float,
         n: int = 3) -> tuple[list[float], list[float]]:
    """Repetition means, log-normal around 1 (off) and 1 + effect (on)."""
    off = [math.exp(rng.gauss(0, sd_off)) for _ in range(n)]
    on = [(1 + effect) * math.exp(rng.gauss(0, sd_on)) for _ in range(n)]
    return on, off


@pytest.mark.parametrize(("sd_on", "sd_off"), [(0.01, 0.01), (0.02, 0.006)])
def test_the_interval_covers_a_known_cost_about_95_times_in_100(sd_on: float,
                                                                sd_off: float) -> None:
    rng = random.Random(2026)
    trials = 1500
    cover = resolved_zero = 0
    for _ in range(trials):
        d = difference(*arms(rng, 0.05, sd_on, sd_off))
        assert d is not None and d.low <= d.estimate <= d.high
        cover += d.low <= 0.05 <= d.high
        z = difference(*arms(rng, 0.0, sd_on, sd_off))
        assert z is not None
        resolved_zero += z.resolved
    assert 0.93 <= cover / trials <= 0.99
    assert resolved_zero / trials <= 0.07  # "no cost" is resolved as a cost at most ~5 %


def test_the_estimate_is_the_ratio_of_the_arms_means() -> None:
    d = difference([1.05, 1.06, 1.04], [1.0, 1.01, 0.99])
    assert d is not None and d.estimate == pytest.approx(1.05 / 1.0 - 1)
    assert d.resolved and d.low > 0 and 2 <= d.df <= 4


def test_no_interval_without_a_spread_in_both_arms() -> None:
    assert difference([1.0], [1.0, 1.1]) is None
    assert difference([1.0, 1.1], [0.0, 0.0]) is None
    same = difference([1.05, 1.05], [1.0, 1.0])
    assert same is not None and same.low == same.high == pytest.approx(0.05)


def test_spread_and_percentile() -> None:
    s = Spread.of([1.0, 2.0, 3.0])
    assert (s.mean, s.sd, s.spread) == (2.0, 1.0, 1.0)
    assert Spread.of([2.0]).sd is None
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.5
    assert percentile([], 0.5) is None


def test_the_order_is_drawn_never_blocked_and_recorded_by_its_seed() -> None:
    assert blocked(["off", "off", "on", "on"]) and blocked(["on", "off", "off"])
    assert not blocked(["off", "on", "off", "on"])
    for seed in range(200):
        order = draw(3, random.Random(seed))
        assert sorted(order) == ["off"] * 3 + ["on"] * 3 and not blocked(order)
    steps = plan("run-1", [1, 4], 3, seed=11)
    assert steps == plan("run-1", [1, 4], 3, seed=11)
    assert steps != plan("run-1", [1, 4], 3, seed=12)
    assert [s.phase for s in steps if s.warmup] == ["run-1/c1/warmup", "run-1/c4/warmup"]
    assert [s.position for s in steps] == list(range(1, 15))
    assert len({s.phase for s in steps}) == 14
    assert all(re.fullmatch(PHASE_NAME_PATTERN, s.phase) for s in plan("x" * 40, [256], 99, 1))
    with pytest.raises(ValueError, match="at least 2"):
        plan("r", [1], 1, 1)
    with pytest.raises(ValueError, match="once"):
        plan("r", [1, 1], 3, 1)
    with pytest.raises(ValueError, match="--name"):
        plan("a/b", [1], 3, 1)


def test_concurrency_option() -> None:
    assert parse_concurrency("1,4") == [1, 4]
    for bad in ("", "0", "1,x", "300"):
        with pytest.raises(ValueError):
            parse_concurrency(bad)
