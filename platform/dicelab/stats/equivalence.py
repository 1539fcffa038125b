"""Equivalence within a margin: two one-sided paired t tests (statsmodels TOST)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from statsmodels.stats.weightstats import ttost_paired

from dicelab.stats.rounding import no_spread


def equivalent(
    candidate: Mapping[int, float], reference: Mapping[int, float], margin: float, *, alpha: float = 0.05
) -> tuple[bool, float]:
    """(equivalent?, TOST p): the mean paired difference lies within +-margin at level alpha.

    Needs 2 common finite seeds; with no spread in the differences it is decided by the difference alone."""
    common = sorted(
        seed
        for seed in set(candidate) & set(reference)
        if math.isfinite(candidate[seed]) and math.isfinite(reference[seed])
    )
    if len(common) < 2 or margin <= 0:
        return False, math.nan
    x = np.array([candidate[seed] for seed in common], dtype=float)
    y = np.array([reference[seed] for seed in common], dtype=float)
    diffs = x - y
    if no_spread(float(diffs.std(ddof=1)), x, y):
        inside = abs(float(diffs.mean())) < margin
        return inside, 0.0 if inside else 1.0
    p = float(ttost_paired(x, y, -margin, margin)[0])
    return p < alpha, p
