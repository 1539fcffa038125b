"""How many seeds it takes: the power of a t test from the observed spread (statsmodels)."""

from __future__ import annotations

import math
import warnings

from statsmodels.stats.power import TTestIndPower, TTestPower

from dicelab.stats.comparison import Test, min_pairs_for_significance

_MAX_SEEDS = 10_000  # beyond this the answer is "not with seeds"


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
        try:
            n = solver.solve_power(effect_size=effect, alpha=alpha, power=power, alternative="two-sided")
        except (ValueError, RuntimeError):
            return _MAX_SEEDS
    n = float(n)
    if not math.isfinite(n):
        return _MAX_SEEDS
    return int(min(max(math.ceil(n - 1e-9), floor), _MAX_SEEDS))
