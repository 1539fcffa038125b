"""dicelab.stats against scipy / statsmodels and on known cases."""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestIndPower, TTestPower

from dicelab.stats import (
    BETTER,
    NO_DIFFERENCE,
    WORSE,
    Comparison,
    compare,
    compare_many,
    equivalent,
    holm,
    min_pairs_for_significance,
    seeds_needed,
    seeds_needed_many,
    verdict,
)

RNG = np.random.default_rng(7)


def _seeds(values) -> dict[int, float]:
    return {seed: float(value) for seed, value in enumerate(values, 1)}


def test_paired_permutation_p_is_the_exact_sign_flip_distribution():
    x, y = RNG.normal(80, 1, 7), RNG.normal(79, 1, 7)
    result = compare(_seeds(x), _seeds(y))
    diffs = x - y
    # enumerate all 2**7 sign patterns by hand: the scipy result must match the definition
    flips = np.array(list(itertools.product([1, -1], repeat=7)))
    null = (flips * diffs).mean(axis=1)
    observed = diffs.mean()
    expected = min(1.0, 2 * min((null >= observed - 1e-12).mean(), (null <= observed + 1e-12).mean()))
    assert result.paired and result.n == 7
    assert result.p_value == pytest.approx(expected)
    assert result.difference == pytest.approx(observed)


def test_paired_interval_and_t_test_match_scipy():
    x, y = RNG.normal(80, 2, 5), RNG.normal(78, 2, 5)
    result = compare(_seeds(x), _seeds(y), test="t", confidence=0.9)
    reference = stats.ttest_rel(x, y)
    interval = reference.confidence_interval(confidence_level=0.9)
    assert result.p_value == pytest.approx(reference.pvalue)
    assert (result.low, result.high) == pytest.approx((interval.low, interval.high))
    assert result.std_difference == pytest.approx(np.std(x - y, ddof=1))


def test_unpaired_fallback_matches_scipy_welch_and_permutation():
    x, y = RNG.normal(80, 1, 4), RNG.normal(78, 2, 5)
    result = compare({1: x[0], 2: x[1], 3: x[2], 4: x[3]}, {11: y[0], 12: y[1], 13: y[2], 14: y[3], 15: y[4]})
    welch = stats.ttest_ind(x, y, equal_var=False).confidence_interval(confidence_level=0.95)
    exact = stats.permutation_test(
        (x, y), lambda u, v, axis: u.mean(axis=axis) - v.mean(axis=axis), n_resamples=np.inf, vectorized=True
    )
    assert not result.paired and "unpaired" in result.test
    assert (result.low, result.high) == pytest.approx((welch.low, welch.high))
    assert result.p_value == pytest.approx(exact.pvalue)


def test_identical_samples_are_no_difference():
    values = _seeds([80.0, 81.0, 79.5, 82.0, 80.5, 81.5])
    result = compare(values, values)
    assert result.difference == 0.0 and result.p_value == 1.0
    assert verdict(result, holm([result.p_value])[0]) == NO_DIFFERENCE


def test_constant_difference_is_not_significant_by_itself():
    # Zero spread: the t test is undefined, and the exact test needs its minimum number of seeds.
    for n in range(2, 6):
        result = compare(_seeds(np.arange(n) + 1.0), _seeds(np.arange(n)))
        assert result.low == result.high == 1.0 and result.note
        assert verdict(result, result.p_value) == NO_DIFFERENCE, n
        t_result = compare(_seeds(np.arange(n) + 1.0), _seeds(np.arange(n)), test="t")
        assert math.isnan(t_result.p_value)
    six = compare(_seeds(np.arange(6) + 1.0), _seeds(np.arange(6)))
    assert six.p_value == pytest.approx(2 / 2**6)
    assert verdict(six, six.p_value) == BETTER


def test_one_seed_gives_no_interval_and_no_test():
    result = compare({1: 80.0}, {1: 78.0})
    assert not result.paired and result.difference == 2.0
    assert math.isnan(result.low) and math.isnan(result.p_value)
    assert verdict(result, result.p_value) == NO_DIFFERENCE


def test_nan_and_failed_seeds_are_left_out_and_counted():
    candidate = {1: 80.0, 2: math.nan, 3: 81.0, 4: 82.0}  # seed 2 NaN
    reference = {1: 78.0, 2: 77.0, 3: 79.5, 5: 80.0}  # seed 4 failed (absent)
    result = compare(candidate, reference)
    assert result.paired and result.n == 2  # seeds 1 and 3
    assert result.n_missing_candidate == 2  # seeds 2 (NaN) and 5
    assert result.n_missing_reference == 1  # seed 4
    assert result.difference == pytest.approx(((80 - 78) + (81 - 79.5)) / 2)


def test_minimum_n_at_which_the_tests_can_decide():
    assert min_pairs_for_significance("permutation") == 6  # 2/2**5 = 0.0625, 2/2**6 = 0.031
    assert min_pairs_for_significance("permutation", paired=False) == 4  # 2/C(6,3)=0.1, 2/C(8,4)=0.029
    assert min_pairs_for_significance("t") == 2


def test_holm_matches_statsmodels_and_keeps_nan():
    p = [0.01, 0.04, math.nan, 0.03, 0.2]
    expected = multipletests([0.01, 0.04, 0.03, 0.2], method="holm")[1]
    adjusted = holm(p)
    assert math.isnan(adjusted[2])
    assert [adjusted[i] for i in (0, 1, 3, 4)] == pytest.approx(list(expected))


def test_verdict_direction():
    better = compare(_seeds([3.0, 4, 5, 6, 7, 8.5]), _seeds([1.0, 2, 3, 4, 5, 6]))
    worse = compare(_seeds([1.0, 2, 3, 4, 5, 6]), _seeds([3.0, 4, 5, 6, 7, 8.5]))
    assert verdict(better, better.p_value) == BETTER
    assert verdict(worse, worse.p_value) == WORSE
    assert verdict(worse, worse.p_value, higher_is_better=False) == BETTER


def test_seeds_needed_matches_statsmodels_and_floors_at_min_n():
    sd, delta = 2.0, 1.0
    expected = math.ceil(TTestPower().solve_power(effect_size=delta / sd, alpha=0.05, power=0.8))
    assert seeds_needed(sd, delta, test="t") == expected
    assert seeds_needed(0.1, 1.0) == 6  # a huge effect: the permutation test's floor
    assert seeds_needed(0.0, 1.0) == 6
    assert seeds_needed(math.nan, 1.0) is None
    with pytest.raises(ValueError):
        seeds_needed(1.0, 0.0)


@pytest.mark.parametrize("paired", [True, False])
def test_seeds_needed_is_statsmodels_solve_power_rounded_up_across_effect_sizes(paired):
    solver = TTestPower() if paired else TTestIndPower()
    size = "nobs" if paired else "nobs1"

    def power(n: int, alpha: float, effect: float) -> float:
        return float(solver.power(effect_size=effect, alpha=alpha, **{size: n}))

    checked = 0
    for effect in np.geomspace(0.03, 5.0, 60):
        for alpha in (0.05, 0.0125, 0.05 / 200):  # the last: Holm's strictest step over 200 comparisons
            found = seeds_needed(1.0, effect, alpha=alpha, paired=paired, test="t")
            floor = min_pairs_for_significance("t", paired=paired, alpha=alpha)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                solved = float(solver.solve_power(effect_size=effect, alpha=alpha, power=0.8))
                around = [power(max(math.ceil(solved) + step, 2), alpha, effect) for step in (-1, 0)]
                if (
                    found < 10_000
                    and not np.isnan([power(n, alpha, effect) for n in (found - 1, found)]).any()
                ):
                    # the definition, whatever solve_power says: the smallest n whose power reaches 0.8
                    assert power(found, alpha, effect) >= 0.8, (effect, alpha)
                    assert found == floor or power(found - 1, alpha, effect) < 0.8, (effect, alpha)
            if not math.isfinite(solved) or np.isnan(around).any():
                continue  # statsmodels' root search fails, or its power is NaN there (see below)
            if not around[0] < 0.8 <= around[1]:
                continue  # its root search stopped off the root (power 0.78 at its answer, alpha 0.00025)
            expected = min(max(math.ceil(solved - 1e-9), floor), 10_000)
            assert found == expected, (effect, alpha)
            checked += 1
    assert checked > 120


def test_where_statsmodels_power_is_nan_the_answer_is_the_simulated_one():
    # effect 4.58 sd, alpha 0.0125, paired: statsmodels' power is NaN at n=3 and its solve_power says 2.89; a
    # simulation of the paired t test gives power 0.55 at n=3 and 0.96 at n=4, so 4 pairs are needed
    rng = np.random.default_rng(0)
    effect, alpha = 4.584706630549912, 0.0125
    simulated = {}
    for n in (3, 4):
        x = rng.normal(effect, 1.0, (100_000, n))
        t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(n))
        simulated[n] = float(np.mean(np.abs(t) > stats.t.ppf(1 - alpha / 2, n - 1)))
    assert simulated[3] < 0.8 <= simulated[4]
    assert seeds_needed(1.0, effect, alpha=alpha, test="t") == 4


@pytest.mark.parametrize("paired", [True, False])
def test_a_huge_effect_needs_the_tests_minimum_not_the_cap(paired):
    # solve_power returns NaN here (the noncentral t's far tail underflows); the answer is the test's floor
    for effect in (6.0, 6.6, 8.0, 20.0):
        assert seeds_needed(1.0, effect, paired=paired) == min_pairs_for_significance(
            "permutation", paired=paired
        )


def test_equivalence_within_margin():
    a = _seeds([80.0, 80.2, 79.9, 80.1, 80.0])
    b = _seeds([80.1, 80.0, 80.0, 80.2, 79.9])
    assert equivalent(a, b, margin=1.0)[0]
    assert not equivalent(a, b, margin=0.01)[0]
    assert not equivalent({1: 1.0}, {1: 1.0}, margin=1.0)[0]  # one pair: nothing to decide


def test_holm_leaves_the_processs_own_heap_freeze_as_it_was():
    import gc

    def kept(before: int) -> bool:
        """A caller's freeze kept, none added: frozen objects that die leave the count (so it may fall a
        little), a freeze of holm's own would add the whole heap and an unfreeze would empty it."""
        after = gc.get_freeze_count()
        return after == 0 if before == 0 else 0 < after <= before

    assert holm([0.01, 0.04]) == pytest.approx([0.02, 0.04])
    frozen_before = gc.get_freeze_count()  # the test suite freezes its heap after collection
    holm([0.01, 0.04])
    assert kept(frozen_before)  # its own freeze undone, a caller's kept
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        holm([0.01, 0.04])
        assert kept(frozen)
    finally:
        if frozen_before == 0:
            gc.unfreeze()


def test_seeds_needed_beyond_the_cap_is_the_cap():
    # effect 0.01 sd: about 78,000 pairs at alpha 0.05, more than any sweep runs
    assert seeds_needed(1.0, 0.01, test="t") == 10_000


def test_seeds_needed_many_gives_each_rows_seeds_needed():
    """The batched search answers every row as seeds_needed does alone: inside the first window, on the
    geometric grid and its bracket, at the cap, at the floor, without a spread and with a zero spread."""
    rng = np.random.default_rng(1)
    rows = 300
    stds = list(np.exp(rng.uniform(np.log(0.02), np.log(80.0), rows)))
    stds[:4] = [math.nan, 0.0, 1e-9, 1e6]
    deltas = list(np.exp(rng.uniform(np.log(0.05), np.log(5.0), rows)))
    alphas = list(0.05 / rng.integers(1, 400, rows))
    paired = list(rng.random(rows) < 0.6)
    for test in ("permutation", "t"):
        many = seeds_needed_many(stds, deltas, alphas, paired, test=test)
        alone = [
            seeds_needed(s, d, alpha=a, paired=bool(p), test=test)
            for s, d, a, p in zip(stds, deltas, alphas, paired, strict=True)
        ]
        assert many == alone
    assert {None, 10_000} <= set(alone) and min(n for n in alone if n) <= 6  # every branch was taken
    assert seeds_needed_many([], [], [], []) == []
    with pytest.raises(ValueError, match="delta"):
        seeds_needed_many([1.0], [0.0], [0.05], [True])


@pytest.mark.parametrize("test", ["permutation", "t"])
def test_compare_many_gives_each_pairs_compare(test):
    """The batched comparisons equal compare() pair by pair, exactly: paired at several sizes (exact and
    Monte Carlo sign flips), unpaired, with missing seeds and NaN, without spread, identical, one-sided."""
    rng = np.random.default_rng(7)
    pairs = []
    for n in (2, 3, 3, 5, 5, 5, 8, 17):
        base = rng.normal(70, 2, n)
        candidate = dict(enumerate(base + rng.normal(0.5, 1, n)))
        pairs.append((candidate, dict(enumerate(base))))
    pairs.append(({0: 1.0, 1: 2.0, 2: math.nan}, {0: 0.5, 1: 1.0, 2: 3.0, 3: 4.0}))  # 2 pairs left
    pairs.append(({0: 1.0, 1: 2.0, 2: 3.0}, {0: 0.0, 1: 1.0, 2: 2.0}))  # no spread in the differences
    pairs.append(({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.0}))  # identical
    pairs.append(({0: 1.0, 1: 2.0, 2: 2.5}, {5: 0.0, 6: 1.0, 7: 1.5}))  # no common seed: unpaired
    pairs.append(({0: 1.0}, {1: math.nan}))  # nothing to compare
    for confidence in (0.95, 0.9):
        many = compare_many(pairs, confidence=confidence, test=test)
        alone = [compare(c, r, confidence=confidence, test=test) for c, r in pairs]
        assert [_fields(c) for c in many] == [_fields(c) for c in alone]
    assert compare_many([]) == []
    with pytest.raises(ValueError, match="test must be"):
        compare_many(pairs, test="wilcoxon")


def _fields(comparison: Comparison) -> tuple[object, ...]:
    """The comparison's fields with NaN as a string, so that equal NaNs compare equal."""
    return tuple(
        "nan" if isinstance(value, float) and math.isnan(value) else value
        for value in dataclasses.astuple(comparison)
    )


def _rounded_constant_difference() -> tuple[dict[int, float], dict[int, float]]:
    """Per-seed values whose differences are the same number on every seed, but whose float subtraction
    leaves a standard deviation of a few 1e-15 (values as an F1 in points has them)."""
    reference = _seeds([78.14, 80.3, 79.27, 81.11, 77.93])
    candidate = _seeds([80.2, 82.36, 81.33, 83.17, 79.99])  # 2.06 more on every seed, as logged
    diffs = np.array([candidate[s] - reference[s] for s in reference])
    assert 0.0 < diffs.std(ddof=1) < 1e-13  # the dust this is about
    return candidate, reference


@pytest.mark.parametrize("test", ["permutation", "t"])
def test_a_difference_equal_on_every_seed_up_to_rounding_has_no_spread(test):
    candidate, reference = _rounded_constant_difference()
    exact = compare(_seeds(np.arange(5) + 2.0), _seeds(np.arange(5)), test=test)  # no dust
    result = compare(candidate, reference, test=test)
    assert result.std_difference == 0.0 and result.low == result.high == pytest.approx(2.06)
    assert result.note == exact.note  # says so, as an exactly constant difference does
    if test == "t":
        assert math.isnan(result.p_value)  # undefined, not p near 0 from the rounding
    else:
        assert result.p_value == pytest.approx(2 / 2**5)
    assert compare_many([(candidate, reference)], test=test) == [result]
    # the seeds a difference equal on every seed needs are the test's minimum, not the 10,000 cap
    floor = min_pairs_for_significance(test, alpha=0.00014)
    assert seeds_needed(result.std_difference, 1.0, alpha=0.00014, test=test) == floor
    assert seeds_needed_many([result.std_difference], [1.0], [0.00014], [True], test=test) == [floor]


def test_seeds_that_agree_up_to_rounding_are_identical_and_equivalent():
    values = _seeds([0.1 + 0.2, 0.3, 0.3, 0.1 + 0.2])
    same = _seeds([0.3, 0.1 + 0.2, 0.3, 0.3])
    result = compare(values, same)
    assert result.p_value == 1.0 and result.note == "identical values on every paired seed"
    assert equivalent(values, same, margin=1e-6) == (True, 0.0)


def test_an_effect_beyond_the_noncentral_ts_range_needs_the_minimum_not_the_cap():
    # delta / sd of 1e12: scipy's noncentral t is NaN at both tails there for every n
    for test in ("permutation", "t"):
        floor = min_pairs_for_significance(test, alpha=0.00014)
        assert floor <= seeds_needed(1e-12, 1.0, alpha=0.00014, test=test) <= floor + 1
        assert seeds_needed(1e-12, 1.0, alpha=0.00014, test=test) < 10_000
