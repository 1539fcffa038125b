"""Corrections for a family of comparisons (statsmodels)."""

from __future__ import annotations

import gc
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
        # statsmodels' Holm branch ends in gc.collect(): a full collection of the whole heap (0.1 s in a bare
        # process, more in a sweep driver holding Ray, Tune and torch) on every call, and the racing searcher
        # calls this on every trial result. Frozen, the heap already there is left out of that collection.
        # A process that froze its heap itself keeps its own freeze (unfreezing is all or nothing).
        ours = gc.get_freeze_count() == 0
        if ours:
            gc.freeze()
        try:
            adjusted[finite] = multipletests(values[finite], method="holm")[1]
        finally:
            if ours:
                gc.unfreeze()
    return [float(value) for value in adjusted]
