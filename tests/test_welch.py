"""Welch's t-test and Student's t distribution against published values."""

from __future__ import annotations

import math

import pytest

from reportgen.compare.welch import regularized_incomplete_beta, t_cdf, t_quantile, t_two_sided_p, welch_t_test

# R's `sleep` data set; `t.test(extra ~ group, data = sleep)` (Welch by default) prints
# t = -1.8608, df = 17.776, p-value = 0.07939, 95 percent CI -3.3654832 0.2054832.
SLEEP_GROUP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_GROUP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_welch_matches_r_on_the_sleep_data():
    # R reports group 1 − group 2; here the change is candidate − baseline.
    result = welch_t_test(SLEEP_GROUP_2, SLEEP_GROUP_1)
    assert result.t == pytest.approx(-1.8608, abs=5e-5)
    assert result.df == pytest.approx(17.776, abs=5e-4)
    assert result.p_value == pytest.approx(0.07939, abs=5e-6)
    assert result.ci_low == pytest.approx(-3.3654832, abs=5e-8)
    assert result.ci_high == pytest.approx(0.2054832, abs=5e-8)
    assert result.difference == pytest.approx(0.75 - 2.33)
    assert not result.significant


def test_swapping_the_runs_flips_the_sign_only():
    ab, ba = welch_t_test(SLEEP_GROUP_1, SLEEP_GROUP_2), welch_t_test(SLEEP_GROUP_2, SLEEP_GROUP_1)
    assert ab.t == pytest.approx(-ba.t) and ab.df == pytest.approx(ba.df) and ab.p_value == pytest.approx(ba.p_value)


@pytest.mark.parametrize("df, quantile", [
    # Two-sided 5% critical values of Student's t (every statistics table).
    (1, 12.706204736), (2, 4.302652730), (5, 2.570581836), (10, 2.228138852), (30, 2.042272456),
    (120, 1.979930405),
])
def test_quantiles_match_the_t_table(df, quantile):
    assert t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-8)
    assert t_quantile(0.025, df) == pytest.approx(-quantile, abs=1e-8)
    assert t_two_sided_p(quantile, df) == pytest.approx(0.05, abs=1e-9)


@pytest.mark.parametrize("t", [-7.5, -1.0, -0.3, 0.0, 0.4, 2.0, 25.0])
def test_cdf_matches_the_closed_forms_for_one_and_two_degrees_of_freedom(t):
    assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)  # Cauchy
    assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)


def test_incomplete_beta_edges_and_symmetry():
    assert regularized_incomplete_beta(2.0, 3.0, 0.0) == 0.0
    assert regularized_incomplete_beta(2.0, 3.0, 1.0) == 1.0
    # I_x(1, 1) = x; I_x(a, b) = 1 − I_{1−x}(b, a).
    assert regularized_incomplete_beta(1.0, 1.0, 0.37) == pytest.approx(0.37, abs=1e-14)
    assert regularized_incomplete_beta(2.5, 0.5, 0.8) == pytest.approx(
        1 - regularized_incomplete_beta(0.5, 2.5, 0.2), abs=1e-14)
    with pytest.raises(ValueError):
        regularized_incomplete_beta(0.0, 1.0, 0.5)


def test_no_judgement_without_two_steps_or_without_any_variation():
    assert welch_t_test([1.0], [1.0, 2.0]) is None
    assert welch_t_test([3.0, 3.0], [4.0, 4.0]) is None
    # One side constant is enough: the other side's spread is the noise.
    assert welch_t_test([3.0, 3.0, 3.0], [4.0, 4.1, 3.9]) is not None


def test_a_large_steady_change_is_significant():
    result = welch_t_test([120.7, 146.2, 145.3, 130.0, 146.9], [25.4, 23.4, 23.9, 23.9, 24.6])
    assert result.significant and result.p_value < 1e-4
    assert result.ci_low < result.difference < result.ci_high < 0
