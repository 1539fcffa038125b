import math

import numpy as np
import pytest
from scipy import stats

from dicelab.analysis import t_interval, welch_interval


def test_t_interval_of_three_values_matches_the_textbook_formula():
    interval = t_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)  # t_{0.975, 2} * s / sqrt(n) with s = 1
    assert interval.n == 3 and interval.n_nan == 0
    assert interval.mean == pytest.approx(2.0)
    assert interval.std == pytest.approx(1.0)
    assert interval.low == pytest.approx(2.0 - half)
    assert interval.high == pytest.approx(2.0 + half)
    assert interval.half_width == pytest.approx(half)


def test_confidence_level_changes_the_quantile():
    values = [0.80, 0.82, 0.79, 0.85]
    wide, narrow = t_interval(values, 0.99), t_interval(values, 0.90)
    expected = stats.t.ppf(0.995, 3) * np.std(values, ddof=1) / 2
    assert wide.half_width == pytest.approx(expected)
    assert narrow.half_width < wide.half_width


def test_single_value_has_a_mean_but_no_interval():
    interval = t_interval([0.9])
    assert interval.n == 1 and interval.mean == 0.9
    assert math.isnan(interval.low) and math.isnan(interval.high) and math.isnan(interval.std)


def test_nan_values_are_left_out_of_the_mean_but_counted():
    interval = t_interval([1.0, math.nan, 3.0, math.inf])
    assert interval.n == 2 and interval.n_nan == 2
    assert interval.mean == pytest.approx(2.0)


def test_no_finite_values_give_nan_everywhere():
    interval = t_interval([math.nan])
    assert interval.n == 0 and interval.n_nan == 1 and math.isnan(interval.mean)


def test_welch_interval_matches_scipy():
    a, b = [92.1, 92.4, 91.9, 92.6], [91.2, 91.5, 91.1]
    diff, low, high = welch_interval(a, b)
    expected = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert diff == pytest.approx(np.mean(a) - np.mean(b))
    assert (low, high) == pytest.approx((expected.low, expected.high))


def test_welch_interval_needs_two_values_per_side():
    diff, low, high = welch_interval([2.0], [1.0, 1.5])
    assert diff == pytest.approx(0.75) and math.isnan(low) and math.isnan(high)


def test_welch_interval_of_constant_groups_is_exact():
    assert welch_interval([2.0, 2.0], [1.0, 1.0]) == (1.0, 1.0, 1.0)


def test_seeds_equal_up_to_rounding_have_no_spread():
    # 0.1 + 0.2 and 0.3 differ in the last bit: the interval is the mean itself, as for equal floats
    from dicelab.analysis.intervals import t_intervals

    values = [0.1 + 0.2, 0.3, 0.3]
    assert np.std(values, ddof=1) > 0.0  # the rounding this is about
    for interval in (t_interval(values), t_intervals([values])[0]):
        assert interval.std == 0.0 and interval.low == interval.high == interval.mean
    assert welch_interval(values, [0.1, 0.1, 0.1]) == pytest.approx((0.2, 0.2, 0.2))
