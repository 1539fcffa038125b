"""How many seeds it takes: the power of a t test from the observed spread (statsmodels)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats
from statsmodels.stats.power import TTestIndPower, TTestPower

from dicelab.stats.comparison import Test, min_pairs_for_significance

_MAX_SEEDS = 10_000  # beyond this the answer is "not with seeds"
_WINDOW = 16  # integers tried first, from just below the normal approximation
_GRID = 100  # points of the geometric grid from 2 to _MAX_SEEDS: neighbours 9 % apart
# Effect sizes beyond this are computed at it: from about 1e10 the noncentral t is NaN at both tails (every
# n would seem to fall short: 10,000 seeds), and power only grows with the effect, so the answer at the cap
# is never fewer seeds than the true one (at worst one more, where scipy's df=1 tail is NaN at the cap too).
_MAX_EFFECT = 1e6


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
    effect = min(delta / std_difference, _MAX_EFFECT)
    solver = TTestPower() if paired else TTestIndPower()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow chatter of the noncentral t at extreme effect sizes
        n = _smallest_n(solver, effect, alpha, power)
    return min(max(n, floor), _MAX_SEEDS)


def _smallest_n(solver: TTestPower | TTestIndPower, effect: float, alpha: float, power: float) -> int:
    """The smallest whole n (2 to _MAX_SEEDS) whose t-test power reaches `power` (_MAX_SEEDS if none does).

    Power grows with n, so vectorised statsmodels power calls find it: first over the _WINDOW integers from
    just below the normal approximation (the t test needs a few more); when the answer is not among them, over
    a geometric grid from 2 to _MAX_SEEDS that brackets it, then over every whole n in the bracket. The same
    answer as rounding `solve_power` up, without its root search (hundreds of scalar power calls per row, most
    of a large report's comparison table), and also where that search fails or stops off the root."""
    size = "nobs" if isinstance(solver, TTestPower) else "nobs1"

    def reaches(n: np.ndarray) -> np.ndarray:
        powers = solver.power(effect_size=effect, alpha=alpha, alternative="two-sided", **{size: n})
        # At large effects statsmodels' two-sided power is NaN (the far tail of the noncentral t underflows);
        # the near tail alone is then the power to within that far tail's negligible mass.
        near = solver.power(effect_size=effect, alpha=alpha / 2, alternative="larger", **{size: n})
        return np.where(np.isnan(powers), near, powers) >= power

    def first_reaching(candidates: np.ndarray) -> int | None:
        """The answer if it is among the consecutive `candidates` (the first may only reach when it is 2)."""
        above = np.flatnonzero(reaches(candidates))
        if not len(above) or (above[0] == 0 and candidates[0] > 2):
            return None
        return int(candidates[above[0]])

    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    approx = (z / effect) ** 2 * (1 if isinstance(solver, TTestPower) else 2)
    if math.isfinite(approx) and approx <= _MAX_SEEDS:
        low = max(2, math.floor(approx) - 2)
        found = first_reaching(np.arange(low, min(low + _WINDOW, _MAX_SEEDS + 1)))
        if found is not None:
            return found
    grid = np.unique(np.geomspace(2, _MAX_SEEDS, _GRID).round().astype(int))
    above = np.flatnonzero(reaches(grid))
    if not len(above):
        return _MAX_SEEDS
    if above[0] == 0:
        return int(grid[0])
    bracket = np.arange(grid[above[0] - 1] + 1, grid[above[0]] + 1)
    return int(bracket[np.flatnonzero(reaches(bracket))[0]])


def seeds_needed_many(
    std_differences: Sequence[float],
    deltas: Sequence[float],
    alphas: Sequence[float],
    paired: Sequence[bool],
    *,
    power: float = 0.8,
    test: Test = "permutation",
) -> list[int | None]:
    """`seeds_needed` of each row (its spread, difference worth detecting, alpha and pairing), the same
    answers with a few statsmodels power calls over all rows at once instead of a few per row: a report's
    comparison table asks for hundreds (308 rows of a 1,000-trial sweep took most of a CPU-second)."""
    rows = len(std_differences)
    if not len(deltas) == len(alphas) == len(paired) == rows:
        raise ValueError("std_differences, deltas, alphas and paired must have the same length")
    answers: list[int | None] = [None] * rows
    pending: dict[bool, list[int]] = {True: [], False: []}
    effects = np.full(rows, math.nan)
    given = zip(std_differences, deltas, alphas, paired, strict=True)
    for row, (std, delta, alpha, pairs) in enumerate(given):
        if not delta > 0:
            raise ValueError(f"delta must be > 0, got {delta}")
        if not math.isfinite(std):
            continue
        floor = min_pairs_for_significance(test, paired=bool(pairs), alpha=alpha)
        if std == 0.0:
            answers[row] = floor
            continue
        effects[row] = min(delta / std, _MAX_EFFECT)
        pending[bool(pairs)].append(row)
    for pairs, which in pending.items():
        if not which:
            continue
        solver = TTestPower() if pairs else TTestIndPower()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = _smallest_n_many(solver, effects[which], np.asarray(alphas, dtype=float)[which], power)
        for row, n in zip(which, found, strict=True):
            floor = min_pairs_for_significance(test, paired=pairs, alpha=alphas[row])
            answers[row] = min(max(int(n), floor), _MAX_SEEDS)
    return answers


def _smallest_n_many(
    solver: TTestPower | TTestIndPower, effects: np.ndarray, alphas: np.ndarray, power: float
) -> np.ndarray:
    """`_smallest_n` of each (effect, alpha), its three steps each one broadcast power call over the rows
    that still need it (statsmodels' power is elementwise: a row's powers do not depend on the others)."""
    size = "nobs" if isinstance(solver, TTestPower) else "nobs1"
    effect, alpha = effects[:, None], alphas[:, None]

    def reaches(rows: np.ndarray, n: np.ndarray) -> np.ndarray:
        """Whether each row's n (one row of `n` per row of `rows`) reaches the power."""
        e, a = effect[rows], alpha[rows]
        powers = solver.power(effect_size=e, alpha=a, alternative="two-sided", **{size: n})
        near = solver.power(effect_size=e, alpha=a / 2, alternative="larger", **{size: n})
        return np.where(np.isnan(powers), near, powers) >= power

    answers = np.zeros(len(effects), dtype=int)
    z = stats.norm.ppf(1 - alphas / 2) + stats.norm.ppf(power)
    approx = (z / effects) ** 2 * (1 if isinstance(solver, TTestPower) else 2)
    windowed = np.flatnonzero(np.isfinite(approx) & (approx <= _MAX_SEEDS))
    unsolved = np.ones(len(effects), dtype=bool)
    if len(windowed):
        low = np.maximum(2, np.floor(approx[windowed]).astype(int) - 2)
        # each row's _WINDOW integers from `low`, cut at _MAX_SEEDS (repeated there: the same first reach)
        candidates = np.minimum(low[:, None] + np.arange(_WINDOW), _MAX_SEEDS)
        above = reaches(windowed, candidates)
        first = above.argmax(axis=1)
        found = above.any(axis=1) & ~((first == 0) & (candidates[:, 0] > 2))
        answers[windowed[found]] = candidates[found, first[found]]
        unsolved[windowed[found]] = False
    rest = np.flatnonzero(unsolved)
    if not len(rest):
        return answers
    grid = np.unique(np.geomspace(2, _MAX_SEEDS, _GRID).round().astype(int))
    above = reaches(rest, np.broadcast_to(grid, (len(rest), len(grid))))
    none, first = ~above.any(axis=1), above.argmax(axis=1)
    answers[rest[none]] = _MAX_SEEDS
    answers[rest[~none & (first == 0)]] = grid[0]
    bracketed = ~none & (first > 0)
    if bracketed.any():
        rows, first = rest[bracketed], first[bracketed]
        starts, ends = grid[first - 1] + 1, grid[first]
        # every whole n in each row's bracket, padded with the bracket's end (which reaches)
        span = np.minimum(starts[:, None] + np.arange((ends - starts).max() + 1), ends[:, None])
        answers[rows] = span[np.arange(len(rows)), reaches(rows, span).argmax(axis=1)]
    return answers
