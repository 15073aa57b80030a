"""The interval observer-cost reports, and the order it runs in: pure, no processes."""

from __future__ import annotations

import math
import random
import re

import pytest

from exporter.labels import PHASE_NAME_PATTERN
from lab.observer_cost.plan import draw, parse_concurrency, plan
from lab.observer_cost.stats import (
    Spread,
    betainc,
    difference,
    percentile,
    t_cdf,
    t_quantile,
)

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


def pairs(rng: random.Random, effect: float, sd_on: float, sd_off: float, drift: float = 0.0,
          n: int = 3) -> tuple[list[float], list[float]]:
    """Pairs of repetition means, log-normal around 1 (off) and 1 + effect (on); `drift` moves
    both repetitions of a pair together (a machine's load between pairs)."""
    on, off = [], []
    for _ in range(n):
        level = math.exp(rng.gauss(0, drift))
        off.append(level * math.exp(rng.gauss(0, sd_off)))
        on.append(level * (1 + effect) * math.exp(rng.gauss(0, sd_on)))
    return on, off


@pytest.mark.parametrize(("sd_on", "sd_off", "drift"),
                         [(0.01, 0.01, 0.0), (0.02, 0.006, 0.0), (0.01, 0.01, 0.2)])
def test_the_interval_covers_a_known_cost_about_95_times_in_100(sd_on: float, sd_off: float,
                                                                drift: float) -> None:
    rng = random.Random(2026)
    trials = 1500
    cover = resolved_zero = 0
    for _ in range(trials):
        d = difference(*pairs(rng, 0.05, sd_on, sd_off, drift))
        assert d is not None and d.low <= d.estimate <= d.high and d.df == 2
        cover += d.low <= 0.05 <= d.high
        z = difference(*pairs(rng, 0.0, sd_on, sd_off, drift))
        assert z is not None
        resolved_zero += z.resolved
    assert 0.93 <= cover / trials <= 0.97
    assert resolved_zero / trials <= 0.065  # "no cost" is resolved as a cost at most ~5 %


def test_the_estimate_is_the_pairs_geometric_mean_ratio() -> None:
    d = difference([1.05, 1.06, 1.04], [1.0, 1.01, 0.99])
    assert d is not None
    assert d.estimate == pytest.approx((1.05 / 1.0 * 1.06 / 1.01 * 1.04 / 0.99) ** (1 / 3) - 1)
    assert d.resolved and d.low > 0 and d.df == 2
    # A pair's drift cancels within it: the same ratios at any level give the same interval.
    e = difference([1.05, 2.12, 0.52], [1.0, 2.02, 0.495])
    assert e is not None and e.estimate == pytest.approx(d.estimate, abs=1e-3)


def test_no_interval_without_pairs_or_a_spread() -> None:
    assert difference([1.0], [1.0]) is None
    assert difference([1.0, 1.1, 1.2], [1.0, 1.1]) is None  # unpaired
    assert difference([1.0, 1.1], [0.0, 1.0]) is None
    assert difference([1.05, 2.1], [1.0, 2.0]) is None  # every ratio equal: no spread


def test_spread_and_percentile() -> None:
    s = Spread.of([1.0, 2.0, 3.0])
    assert (s.mean, s.sd, s.spread) == (2.0, 1.0, 1.0)
    assert Spread.of([2.0]).sd is None
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.5
    assert percentile([], 0.5) is None


def test_the_order_is_drawn_in_pairs_and_recorded_by_its_seed() -> None:
    for seed in range(200):
        order = draw(3, random.Random(seed))
        assert all(sorted(p) == ["off", "on"] for p in order) and len(set(order)) == 2
    steps = plan("run-1", [1, 4], 3, seed=11)
    assert steps == plan("run-1", [1, 4], 3, seed=11)
    # 6 orders of three pairs a concurrency (not all in one order): the recorded random seed draws among 36.
    assert len({tuple(plan("run-1", [1, 4], 3, seed=n)) for n in range(200)}) == 36
    assert [s.phase for s in steps if s.warmup] == ["run-1/c1/warmup", "run-1/c4/warmup"]
    assert [s.position for s in steps] == list(range(1, 15))
    assert len({s.phase for s in steps}) == 14
    for c in (1, 4):  # pair n is off-n and on-n, back to back
        reps = [s for s in steps if s.concurrency == c and not s.warmup]
        assert [{a.number, b.number} for a, b in zip(reps[::2], reps[1::2], strict=True)] == [
            {1}, {2}, {3}]
        assert all({a.arm, b.arm} == {"off", "on"} for a, b in zip(reps[::2], reps[1::2],
                                                                  strict=True))
    assert all(re.fullmatch(PHASE_NAME_PATTERN, s.phase)
               for s in plan("x" * 40, [1, 4, 256], 99, 1))
    with pytest.raises(ValueError, match="at least 3 repetitions an arm"):
        plan("r", [1, 4], 2, 1)
    with pytest.raises(ValueError, match=r"C1 and C4 must both be measured.*C4 missing"):
        plan("r", [1], 3, 1)
    with pytest.raises(ValueError, match="once"):
        plan("r", [1, 1], 3, 1)
    with pytest.raises(ValueError, match="--name"):
        plan("a/b", [1, 4], 3, 1)


def test_concurrency_option() -> None:
    assert parse_concurrency("1,4") == [1, 4]
    for bad in ("", "0", "1,x", "300"):
        with pytest.raises(ValueError):
            parse_concurrency(bad)
