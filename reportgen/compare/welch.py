"""Welch's t-test on two samples of step times, with Student's t distribution.

Two runs' step times are two small samples with different spreads, so the
unequal-variance (Welch) test is the right one. scipy is not a dependency:
the t distribution's tail is the regularized incomplete beta function,
evaluated by its continued fraction (Lentz's method), which converges fast
for every argument once the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) is used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05  # two-sided significance level used to call a change "beyond noise"
_EPS = 1e-15
_TINY = 1e-300
_MAX_TERMS = 500


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (modified Lentz)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, _MAX_TERMS + 1):
        two_m = 2 * m
        # Even step, then odd step of the fraction.
        for numerator in (m * (b - m) * x / ((a + two_m - 1) * (a + two_m)),
                          -(a + m) * (a + b + m) * x / ((a + two_m) * (a + two_m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= c * d
        if abs(c * d - 1.0) < _EPS:
            break
    return result


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if not (a > 0 and b > 0):
        raise ValueError("a and b must be positive")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom (df may be fractional)."""
    if math.isinf(t):
        return 0.0
    return regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    tail = t_two_sided_p(t, df) / 2.0
    return 1.0 - tail if t >= 0 else tail


def t_quantile(probability: float, df: float) -> float:
    """The t with P(T <= t) = probability (bisection on the monotone CDF)."""
    if not 0.0 < probability < 1.0:
        raise ValueError("probability must be in (0, 1)")
    if probability == 0.5:
        return 0.0
    upper_tail = min(probability, 1.0 - probability)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < 1.0 - upper_tail:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_cdf(mid, df) < 1.0 - upper_tail:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * max(1.0, high):
            break
    t = (low + high) / 2.0
    return t if probability > 0.5 else -t


@dataclass(frozen=True)
class WelchResult:
    """Welch's test of candidate − baseline mean."""

    n_baseline: int
    n_candidate: int
    mean_baseline: float
    mean_candidate: float
    difference: float  # candidate − baseline
    t: float
    df: float
    p_value: float  # two-sided
    ci_low: float  # confidence interval of the difference
    ci_high: float
    confidence: float

    @property
    def significant(self) -> bool:
        return self.p_value < 1.0 - self.confidence


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    return mean, math.fsum((v - mean) ** 2 for v in values) / (n - 1)


def welch_t_test(baseline: Sequence[float], candidate: Sequence[float],
                 confidence: float = 1.0 - ALPHA) -> WelchResult | None:
    """None when the test cannot say anything: fewer than two values on a side, or no
    variation at all on either side."""
    baseline = [float(v) for v in baseline]
    candidate = [float(v) for v in candidate]
    n_a, n_b = len(baseline), len(candidate)
    if n_a < 2 or n_b < 2:
        return None
    mean_a, var_a = _mean_var(baseline)
    mean_b, var_b = _mean_var(candidate)
    se_a, se_b = var_a / n_a, var_b / n_b
    se2 = se_a + se_b
    if se2 <= 0.0:
        return None
    difference = mean_b - mean_a
    t = difference / math.sqrt(se2)
    df = se2 * se2 / (se_a * se_a / (n_a - 1) + se_b * se_b / (n_b - 1))
    p = t_two_sided_p(t, df)
    half_width = t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(se2)
    return WelchResult(n_a, n_b, mean_a, mean_b, difference, t, df, p, difference - half_width,
                       difference + half_width, confidence)


__all__ = ["ALPHA", "WelchResult", "regularized_incomplete_beta", "t_cdf", "t_quantile", "t_two_sided_p",
           "welch_t_test"]
