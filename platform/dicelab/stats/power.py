"""How many seeds it takes: the power of a t test from the observed spread (statsmodels)."""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats
from statsmodels.stats.power import TTestIndPower, TTestPower

from dicelab.stats.comparison import Test, min_pairs_for_significance

_MAX_SEEDS = 10_000  # beyond this the answer is "not with seeds"
_WINDOW = 16  # integers tried above the normal approximation (the t test needs a few more)


def seeds_needed(
    std_difference: float,
    delta: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    paired: bool = True,
    test: Test = "permutation",
) -> int | None:
    """Seeds (pairs; per configuration unpaired) to detect a true difference `delta` with `power`.

    From the t test's power at effect size delta / sd (the permutation test's power approaches it); never
    fewer than the test's minimum n. None when the spread is unknown (fewer than 2 seeds); the minimum n when
    the spread is 0."""
    if not delta > 0:
        raise ValueError(f"delta must be > 0, got {delta}")
    floor = min_pairs_for_significance(test, paired=paired, alpha=alpha)
    if not math.isfinite(std_difference):
        return None
    if std_difference == 0.0:
        return floor
    effect = delta / std_difference
    solver = TTestPower() if paired else TTestIndPower()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter at extreme effect sizes
        n = _smallest_n(solver, effect, alpha, power)
        if n is None:  # outside the window around the normal approximation: solve for it
            try:
                n = solver.solve_power(effect_size=effect, alpha=alpha, power=power, alternative="two-sided")
            except (ValueError, RuntimeError):
                return _MAX_SEEDS
    n = float(n)
    if not math.isfinite(n):
        return _MAX_SEEDS
    return int(min(max(math.ceil(n - 1e-9), floor), _MAX_SEEDS))


def _smallest_n(solver: TTestPower | TTestIndPower, effect: float, alpha: float, power: float) -> int | None:
    """The smallest whole n whose t-test power reaches `power`, from one vectorised power call over the
    integers near the normal approximation; None when the answer lies outside them.

    The same answer as rounding `solve_power` up (power grows with n), without its root search, which took
    most of a large report's comparison table."""
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    approx = (z / effect) ** 2 * (1 if isinstance(solver, TTestPower) else 2)
    if not math.isfinite(approx) or approx > _MAX_SEEDS:
        return None
    low = max(2, math.floor(approx) - 2)
    candidates = np.arange(low, low + _WINDOW)
    size = "nobs" if isinstance(solver, TTestPower) else "nobs1"
    powers = solver.power(effect_size=effect, alpha=alpha, alternative="two-sided", **{size: candidates})
    # At large effects statsmodels' two-sided power is NaN (the far tail of the noncentral t underflows); the
    # near tail alone is then the power to within that far tail's negligible mass.
    near = solver.power(effect_size=effect, alpha=alpha / 2, alternative="larger", **{size: candidates})
    powers = np.where(np.isnan(powers), near, powers)
    reached = np.flatnonzero(powers >= power)
    if not len(reached) or (reached[0] == 0 and low > 2):  # the first candidate already reaches: look lower
        return None
    return int(candidates[reached[0]])
