"""One configuration against another over seeds: paired when they share seeds, unpaired otherwise.

Paired (same `train.seed`: same data order, same initialisation of shared parts) the seed-to-seed noise that
both configurations share cancels in the differences. Tests:
- "permutation" (default): scipy's exact sign-flip permutation test of the mean paired difference (exact for
  up to 2**16 sign patterns, Monte Carlo with a fixed seed beyond). Valid at any n under symmetric
  differences, no normality assumed; with n pairs it cannot go below 2 / 2**n (two-sided), so it needs 6
  pairs to reach p < 0.05 at all. Unpaired: the exact two-sample permutation test of the difference of means.
- "t": Student's paired t test (Welch's t test unpaired); assumes normal differences, reaches small p with
  2 pairs when the differences are large and consistent (racing's choice where speed matters).
The interval is always the t interval of the mean difference (paired t; Welch unpaired), from scipy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from dicelab.stats.rounding import no_spread, rounding_of

Test = Literal["permutation", "t"]
TESTS: tuple[str, ...] = ("permutation", "t")
BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no detectable difference"
_EXACT_LIMIT = 2**16  # sign patterns / splits enumerated exactly; beyond, a seeded Monte Carlo estimate
_RESAMPLES_SEED = 0
_BATCH = 2048  # resamples at once: the same p in bounded memory (unbatched: ~2 GB, 4x the time at 400 pairs)


@dataclass(frozen=True)
class Comparison:
    """candidate - reference over seeds. `n` is the number of pairs (paired) or of values (unpaired)."""

    paired: bool
    test: str  # human name of the test behind p_value
    n: int
    n_candidate: int  # finite values of each side
    n_reference: int
    n_missing_candidate: int  # seeds present on one side only, or NaN there
    n_missing_reference: int
    difference: float  # mean paired difference, or difference of means
    low: float  # interval of the difference; NaN when it cannot be computed
    high: float
    std_difference: float  # sd of the paired differences (paired), pooled sd (unpaired); NaN if n < 2
    p_value: float  # two-sided, uncorrected; NaN when no test is possible
    min_n: int  # the smallest n (pairs; per side unpaired) at which this test can reach p < 0.05 at all
    note: str = ""  # a degenerate case, said in words

    @property
    def decidable(self) -> bool:
        return math.isfinite(self.p_value)


def _finite(values: Mapping[int, float]) -> dict[int, float]:
    return {seed: float(v) for seed, v in values.items() if v is not None and math.isfinite(float(v))}


def min_pairs_for_significance(
    test: Test = "permutation", *, paired: bool = True, alpha: float = 0.05
) -> int:
    """Smallest n (pairs; per side of a balanced unpaired design) at which the test can reach p < alpha.

    Exact sign-flip: the smallest two-sided p with n pairs is 2 / 2**n. Exact two-sample permutation with n
    per side: 2 / C(2n, n). A t test can reach any p with 2 values (per side)."""
    if test == "t":
        return 2
    n = 1
    while (2 / 2**n if paired else 2 / math.comb(2 * n, n)) >= alpha:
        n += 1
    return n


def compare(
    candidate: Mapping[int, float],
    reference: Mapping[int, float],
    *,
    confidence: float = 0.95,
    test: Test = "permutation",
) -> Comparison:
    """Compare two configurations' per-seed values ({train.seed: value}; NaN or None = missing seed).

    Paired on the seeds both have when there are at least 2 of them; otherwise unpaired on all values."""
    if test not in TESTS:
        raise ValueError(f"test must be one of {', '.join(TESTS)}, got {test!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    a, b = _finite(candidate), _finite(reference)
    common = sorted(set(a) & set(b))
    if len(common) >= 2:
        return _paired(a, b, common, set(candidate) | set(reference), confidence, test)
    return _unpaired(a, b, set(candidate) | set(reference), confidence, test)


def compare_many(
    pairs: Sequence[tuple[Mapping[int, float], Mapping[int, float]]],
    *,
    confidence: float = 0.95,
    test: Test = "permutation",
) -> list[Comparison]:
    """`compare` of each (candidate, reference). The same results; the paired comparisons with a spread and
    an exact (or t) test are computed together, one scipy call for the t intervals and one for the tests
    per number of pairs (scipy's tests are elementwise over an axis): a report's few hundred comparisons
    cost a scipy call each otherwise, most of it scipy's own per-call work."""
    if test not in TESTS:
        raise ValueError(f"test must be one of {', '.join(TESTS)}, got {test!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    found: list[Comparison | None] = [None] * len(pairs)
    together: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}  # pairs -> (position, x, y)
    prepared = []
    for position, (candidate, reference) in enumerate(pairs):
        a, b = _finite(candidate), _finite(reference)
        common = sorted(set(a) & set(b))
        seeds = set(candidate) | set(reference)
        prepared.append((a, b, common, seeds))
        if len(common) < 2:
            found[position] = _unpaired(a, b, seeds, confidence, test)
            continue
        x, y = np.array([a[seed] for seed in common]), np.array([b[seed] for seed in common])
        spread = not no_spread(float((x - y).std(ddof=1)), x, y)
        if spread and (test == "t" or 2 ** len(common) <= _EXACT_LIMIT):
            together.setdefault(len(common), []).append((position, x, y))
        else:  # no spread (no interval, maybe no test) or a Monte Carlo test (one random stream each)
            found[position] = _paired(a, b, common, seeds, confidence, test)
    for members in together.values():
        x = np.stack([member[1] for member in members])
        y = np.stack([member[2] for member in members])
        ttest = stats.ttest_rel(x, y, axis=-1)
        interval = ttest.confidence_interval(confidence_level=confidence)
        p = ttest.pvalue if test == "t" else _sign_flip_p(x, y)
        for row, (position, _, _) in enumerate(members):
            computed = (float(interval.low[row]), float(interval.high[row]), float(p[row]))
            found[position] = _paired(*prepared[position], confidence, test, computed)
    return [comparison for comparison in found if comparison is not None]


def _sign_flip_p(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """scipy's sign-flip permutation test of the mean paired difference, along the last axis."""
    return stats.permutation_test(
        (x, y),
        lambda u, v, axis: np.mean(u - v, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=_EXACT_LIMIT,
        alternative="two-sided",
        rng=_RESAMPLES_SEED,
        batch=_BATCH,
        axis=-1,
    ).pvalue


def _paired(
    a: dict[int, float],
    b: dict[int, float],
    common: list[int],
    seeds: set[int],
    confidence: float,
    test: Test,
    computed: tuple[float, float, float] | None = None,  # low, high and p from compare_many's batch
) -> Comparison:
    x = np.array([a[seed] for seed in common])
    y = np.array([b[seed] for seed in common])
    diffs = x - y
    n = len(common)
    std = float(diffs.std(ddof=1))
    if no_spread(std, x, y):
        std = 0.0  # rounding dust (see dicelab.stats.rounding)
    mean = float(diffs.mean())
    note = ""
    if std == 0.0:
        # scipy's t interval is NaN here; every seed agrees exactly, so the interval is the point itself.
        low = high = mean
        note = "every seed gives the same difference (no spread): only the test's count of seeds can decide"
    elif computed is not None:
        low, high = computed[0], computed[1]
    else:
        interval = stats.ttest_rel(x, y).confidence_interval(confidence_level=confidence)
        low, high = float(interval.low), float(interval.high)
    if np.all(np.abs(diffs) <= rounding_of(x, y)):
        p = 1.0
        note = "identical values on every paired seed"
    elif computed is not None:
        p = computed[2]
    elif test == "t":
        p = float(stats.ttest_rel(x, y).pvalue) if std > 0.0 else math.nan
        if std == 0.0:
            note = "every seed gives the same difference: the t test is undefined (use the permutation test)"
    else:
        p = float(_sign_flip_p(x, y))
    name = "exact sign-flip permutation test (paired)" if test == "permutation" else "paired t test"
    if test == "permutation" and 2**n > _EXACT_LIMIT:
        name = f"sign-flip permutation test (paired, {_EXACT_LIMIT} random sign patterns)"
    return Comparison(
        paired=True,
        test=name,
        n=n,
        n_candidate=len(a),
        n_reference=len(b),
        n_missing_candidate=len(seeds - set(a)),
        n_missing_reference=len(seeds - set(b)),
        difference=mean,
        low=low,
        high=high,
        std_difference=std,
        p_value=p,
        min_n=min_pairs_for_significance(test, paired=True),
        note=note,
    )


def _unpaired(
    a: dict[int, float], b: dict[int, float], seeds: set[int], confidence: float, test: Test
) -> Comparison:
    x, y = np.array(list(a.values())), np.array(list(b.values()))
    name = (
        "exact two-sample permutation test (unpaired)" if test == "permutation" else "Welch t test (unpaired)"
    )
    base = {
        "paired": False,
        "test": name,
        "n": len(x) + len(y),
        "n_candidate": len(x),
        "n_reference": len(y),
        "n_missing_candidate": len(seeds - set(a)),
        "n_missing_reference": len(seeds - set(b)),
        "min_n": min_pairs_for_significance(test, paired=False),
    }
    if len(x) == 0 or len(y) == 0:
        side = "the candidate" if len(x) == 0 else "the reference"
        return Comparison(
            **base, difference=math.nan, low=math.nan, high=math.nan, std_difference=math.nan,
            p_value=math.nan, note=f"{side} has no usable seed",
        )  # fmt: skip
    difference = float(x.mean() - y.mean())
    if len(x) < 2 or len(y) < 2:
        return Comparison(
            **base, difference=difference, low=math.nan, high=math.nan, std_difference=math.nan,
            p_value=math.nan, note="one seed on a side: no spread, so no interval and no test",
        )  # fmt: skip
    pooled = float(
        math.sqrt((x.var(ddof=1) * (len(x) - 1) + y.var(ddof=1) * (len(y) - 1)) / (len(x) + len(y) - 2))
    )
    if no_spread(pooled, x, y):
        pooled = 0.0  # rounding dust (see dicelab.stats.rounding)
    welch = stats.ttest_ind(x, y, equal_var=False)
    if pooled == 0.0:
        low = high = difference
        p = 1.0 if abs(difference) <= rounding_of(x, y) else math.nan
        note = "no spread within either configuration: the interval is the difference itself"
    else:
        interval = welch.confidence_interval(confidence_level=confidence)
        low, high, note = float(interval.low), float(interval.high), ""
        p = float(welch.pvalue)
    if test == "permutation" and not (pooled == 0.0 and p == 1.0):
        p = float(
            stats.permutation_test(
                (x, y),
                lambda u, v, axis: np.mean(u, axis=axis) - np.mean(v, axis=axis),
                permutation_type="independent",
                vectorized=True,
                n_resamples=_EXACT_LIMIT,
                alternative="two-sided",
                rng=_RESAMPLES_SEED,
                batch=_BATCH,
            ).pvalue
        )
    return Comparison(
        **base, difference=difference, low=low, high=high, std_difference=pooled, p_value=p, note=note
    )


def verdict(
    comparison: Comparison, adjusted_p: float, *, alpha: float = 0.05, higher_is_better: bool = True
) -> str:
    """better / worse when the (corrected) p is below alpha, else "no detectable difference"."""
    if not math.isfinite(adjusted_p) or adjusted_p >= alpha or comparison.difference == 0.0:
        return NO_DIFFERENCE
    ahead = comparison.difference > 0
    return BETTER if ahead == higher_is_better else WORSE
