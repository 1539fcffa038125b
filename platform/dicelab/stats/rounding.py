"""A spread within floating-point rounding is no spread.

Seeds that agree, or paired differences that are the same on every seed, come out of float arithmetic with a
standard deviation of a few 1e-15 instead of exactly 0 (a mean of equal values, or x - y of values that
differ by the same amount, round differently). Taken at face value that dust is a spread: the effect size
delta / sd reaches 1e15, where the noncentral t of a power calculation underflows (10,000 seeds "needed"
for a difference every seed already shows) and a t test reports p near 0 from rounding alone.
"""

from __future__ import annotations

import numpy as np

# Units of double precision (1e-15 each) of the largest value involved: the margin scipy allows for
# catastrophic cancellation in its moment calculations, generous for the few subtractions made here.
_RESOLUTIONS = 10


def rounding_of(*values: np.ndarray) -> float:
    """The rounding error that a spread of, or differences between, these values can carry."""
    magnitude = max((float(np.max(np.abs(v))) for v in values if np.size(v)), default=0.0)
    return _RESOLUTIONS * float(np.finfo(float).resolution) * magnitude


def no_spread(std: float, *values: np.ndarray) -> bool:
    """Whether a standard deviation computed from `values` is zero up to their rounding."""
    return bool(std <= rounding_of(*values))
