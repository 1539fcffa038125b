"""Seed-to-seed intervals through scipy: Student-t of a mean, Welch's of a difference of means."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from dicelab.stats.rounding import no_spread


@dataclass(frozen=True)
class Interval:
    """Mean of the finite values with a two-sided t-interval; NaN bounds when n < 2 (no spread to show)."""

    n: int  # finite values used
    n_nan: int  # NaN values seen and left out of the mean
    mean: float
    std: float  # sample standard deviation (ddof=1)
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def t_interval(values: Iterable[float], confidence: float = 0.95) -> Interval:
    array = np.asarray(list(values), dtype=float)
    finite = array[np.isfinite(array)]
    n, n_nan = int(finite.size), int(array.size - finite.size)
    if n == 0:
        return Interval(0, n_nan, math.nan, math.nan, math.nan, math.nan)
    mean = float(finite.mean())
    if n == 1:
        return Interval(1, n_nan, mean, math.nan, math.nan, math.nan)
    std = float(finite.std(ddof=1))
    if no_spread(std, finite):  # scipy gives NaN bounds for a zero scale; identical seeds leave no spread
        return Interval(n, n_nan, mean, 0.0, mean, mean)
    low, high = stats.t.interval(confidence, df=n - 1, loc=mean, scale=float(stats.sem(finite)))
    return Interval(n, n_nan, mean, std, float(low), float(high))


def t_intervals(groups: Sequence[Iterable[float]], confidence: float = 0.95) -> list[Interval]:
    """`t_interval` of each group, with one vectorised scipy call for all the t quantiles: the same numbers,
    where a call per group spends most of a millisecond in scipy's distribution machinery (a sensitivity
    figure of 40 swept values asks for 40 intervals per line)."""
    found: list[Interval | None] = []
    # position, n, n_nan, mean, std and the finite values of each group with a spread
    pending: list[tuple[int, int, int, float, float, np.ndarray]] = []
    for values in groups:
        array = np.asarray(list(values), dtype=float)
        finite = array[np.isfinite(array)]
        n, n_nan = int(finite.size), int(array.size - finite.size)
        if n == 0:
            found.append(Interval(0, n_nan, math.nan, math.nan, math.nan, math.nan))
            continue
        mean = float(finite.mean())
        if n == 1:
            found.append(Interval(1, n_nan, mean, math.nan, math.nan, math.nan))
            continue
        std = float(finite.std(ddof=1))
        if no_spread(std, finite):
            found.append(Interval(n, n_nan, mean, 0.0, mean, mean))
            continue
        pending.append((len(found), n, n_nan, mean, std, finite))
        found.append(None)
    if pending:
        # scipy's standard errors, one call per group size (elementwise along the last axis)
        sizes = np.array([row[1] for row in pending])
        sems = np.empty(len(pending))
        for size in np.unique(sizes):
            rows = np.flatnonzero(sizes == size)
            sems[rows] = stats.sem(np.stack([pending[row][5] for row in rows]), axis=-1)
        means = np.array([row[3] for row in pending])
        lows, highs = stats.t.interval(confidence, df=sizes - 1, loc=means, scale=sems)
        for (position, n, n_nan, mean, std, _), low, high in zip(pending, lows, highs, strict=True):
            found[position] = Interval(n, n_nan, mean, std, float(low), float(high))
    return [interval for interval in found if interval is not None]


def welch_interval(
    values: Iterable[float], baseline: Iterable[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """mean(values) - mean(baseline) with Welch's t-interval (unequal variances); NaN bounds if n < 2."""
    a = np.asarray(list(values), dtype=float)
    b = np.asarray(list(baseline), dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        return math.nan, math.nan, math.nan
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return diff, math.nan, math.nan
    if no_spread(float(a.std(ddof=1)), a) and no_spread(float(b.std(ddof=1)), b):  # constant groups: exact
        return diff, diff, diff
    interval = stats.ttest_ind(a, b, equal_var=False).confidence_interval(confidence)
    return diff, float(interval.low), float(interval.high)
