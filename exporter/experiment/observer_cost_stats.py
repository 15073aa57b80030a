"""The arithmetic of `observer-cost`: the on arm's mean latency over the off arm's, with an
interval from the repetitions themselves. Pure functions, no I/O.

The interval is a Welch t-interval on the log of that ratio. Each arm contributes the variance of
the log of its mean, estimated by the delta method as its repetition means' squared coefficient
of variation over their number; the t quantile is taken at the Welch-Satterthwaite degrees of
freedom. Why this and not a bootstrap over repetitions: with three repetitions an arm has ten
distinct bootstrap resamples, and a percentile interval over them takes the spread of three values
as the truth, so it comes out too narrow; the t quantile at two to four degrees of freedom is what
pays for estimating a spread from three values. Why the log: an observer's cost is a fraction of
every request, and a ratio's sampling distribution is skewed; on the log scale it is symmetric, and
the interval maps back onto ratios exactly. A test checks the coverage on simulated repetitions.

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


def difference(on: Sequence[float], off: Sequence[float], level: float = LEVEL) -> Difference | None:
    """The on arm's mean over the off arm's, minus 1, with its Welch t-interval on the log scale;
    None with fewer than two repetitions in either arm or a mean that is not positive."""
    if len(on) < 2 or len(off) < 2:
        return None
    a, b = Spread.of(on), Spread.of(off)
    if a.mean <= 0 or b.mean <= 0 or a.cv is None or b.cv is None:
        return None
    ratio = a.mean / b.mean
    va, vb = a.cv ** 2 / a.n, b.cv ** 2 / b.n
    se = math.sqrt(va + vb)
    if se == 0.0:  # identical repetitions: no spread to build an interval from
        df = float(a.n + b.n - 2)
        return Difference(ratio - 1, ratio - 1, ratio - 1, level, df, 0.0)
    df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1))
    t = t_quantile(0.5 + level / 2.0, df)
    return Difference(ratio - 1, ratio * math.exp(-t * se) - 1, ratio * math.exp(t * se) - 1,
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
