"""The arithmetic of `observer-cost`: what the observer costs, as the ratio of each pair's on
repetition to its off repetition, with an interval from the pairs themselves. Pure functions, no
I/O.

The plan (plan.py) runs the repetitions in pairs, one off and one on, back to back in
an order drawn for each pair. The statistic follows that design: each pair gives the log of its
on repetition's mean over its off repetition's; the estimate is their mean (mapped back, the
pairs' geometric mean ratio, minus 1) and the interval a t-interval on them with n - 1 degrees of
freedom. Why pairs: a shared machine's load, a warming cache or a neighbour drift over minutes,
and an interval from the two arms' spreads taken apart (the Welch interval this replaced) counts
that drift as the observer's effect whenever the draw happens to put one arm more often where the
machine was slow; in simulated A/A runs with such drift it called one run in six or more a
resolved difference at zero cost (tests/lab/observer_cost/test_calibration.py). Within a
pair the drift has had no time to act, and what it does between pairs is in the pairs' spread.
Why not a bootstrap: three pairs have ten distinct resamples, and a percentile interval over them
takes the spread of three values as the truth; the t quantile at two degrees of freedom is what
pays for estimating a spread from three values. Why the log: an observer's cost is a fraction of
every request, and a ratio's sampling distribution is skewed; on the log scale it is symmetric,
and the interval maps back onto ratios exactly.

The t quantile is computed here (the regularized incomplete beta function by its continued
fraction, then bisection) rather than by scipy: one quantile does not justify scipy in the
sidecar's image.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                    -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function with `df` (> 0, may be fractional) degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t, 0.5 <= p < 1 (bisection on t_cdf to 1e-10)."""
    if not 0.5 <= p < 1.0 or not df > 0:
        raise ValueError(f"need 0.5 <= p < 1 and df > 0, got p={p}, df={df}")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    while hi - lo > 1e-10 * max(1.0, hi):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2.0


@dataclass(frozen=True, slots=True)
class Spread:
    """One arm's repetition means."""

    n: int
    mean: float
    sd: float | None  # None with one repetition
    cv: float | None  # sd / mean
    spread: float  # (largest - smallest) / mean

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("an arm without repetitions")
        mean = statistics.fmean(values)
        sd = statistics.stdev(values) if len(values) > 1 else None
        return cls(len(values), mean, sd, None if sd is None or not mean else sd / mean,
                   (max(values) - min(values)) / mean if mean else 0.0)


@dataclass(frozen=True, slots=True)
class Difference:
    """on / off - 1, its interval at `level`, and whether the interval excludes 0."""

    estimate: float
    low: float
    high: float
    level: float
    df: float
    t: float

    @property
    def resolved(self) -> bool:
        return self.low > 0 or self.high < 0


MIN_PAIRS = 3  # the observer-cost protocol: three off and three on repetitions per concurrency


def difference(on: Sequence[float], off: Sequence[float],
               level: float = LEVEL) -> Difference | None:
    """The pairs' geometric mean ratio of on over off, minus 1, with its t-interval on the log
    scale: `on[i]` and `off[i]` are the i-th pair's repetitions. None with fewer than two pairs,
    arms of different lengths, a value that is not positive, or pairs whose ratios are all equal
    (no spread to build an interval from: nothing is claimed)."""
    if len(on) != len(off) or len(on) < 2 or min(*on, *off) <= 0:
        return None
    logs = [math.log(a / b) for a, b in zip(on, off, strict=True)]
    n = len(logs)
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    if sd == 0.0:
        return None
    se = sd / math.sqrt(n)
    df = float(n - 1)
    t = t_quantile(0.5 + level / 2.0, df)
    return Difference(math.expm1(mean), math.expm1(mean - t * se), math.expm1(mean + t * se),
                      level, df, t)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0-1) of exact values, linear between the two nearest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
