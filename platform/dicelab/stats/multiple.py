"""Corrections for a family of comparisons (statsmodels)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from statsmodels.stats.multitest import multipletests


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values over the finite ones; NaN (no test possible) stays NaN and does not
    count in the family."""
    values = np.asarray(p_values, dtype=float)
    adjusted = np.full(values.shape, math.nan)
    finite = np.isfinite(values)
    if finite.any():
        adjusted[finite] = multipletests(values[finite], method="holm")[1]
    return [float(value) for value in adjusted]
