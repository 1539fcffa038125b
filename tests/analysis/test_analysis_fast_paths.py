"""The report's vectorised paths give exactly what the per-point computations they replaced give.

A 1,000-trial report has hundreds of curve points and comparisons; the per-point pandas and scipy work was
most of its cost, so those paths now compute a whole line (or family) at once. Each test recomputes the
numbers the slow way, from the public per-point functions, and asks for equality (not closeness)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dicelab.analysis import AnalysisOptions, load_runs, observations
from dicelab.analysis.comparisons import (
    BaselineFinder,
    Configuration,
    _matches,
    _partner,
    decisions_from_observations,
    seed_values,
)
from dicelab.analysis.intervals import t_interval, t_intervals
from dicelab.analysis.observations import LOSS, TASK, VARIANT, exclusion_counts
from dicelab.analysis.sensitivity import curve_lines, curves_from_lines
from dicelab.stats import NO_DIFFERENCE, compare, seeds_needed
from dicelab.tracking import conventions as names

ALPHAS = (0.1, 0.3, 0.6)
SEEDS = 4


@pytest.fixture(scope="module")
def runs(module_tracking_uri, module_sweep_log):
    """ce, dice and tversky at three alpha values x 4 seeds (ce at each alpha is the baseline there), with a
    failed trial, a trial without its metric, a degenerate trial, a missing seed and a second variant."""
    log = module_sweep_log("grid")
    rng = np.random.default_rng(3)
    degenerate = None
    for loss_index, loss in enumerate(("ce", "dice", "tversky")):
        for alpha in ALPHAS:
            for seed in range(SEEDS):
                if (loss, alpha, seed) == ("dice", 0.3, 2):
                    continue  # a missing seed: that point is paired on the other three
                value = 0.7 + 0.02 * loss_index + 0.05 * alpha + 0.01 * seed + rng.normal(0, 0.01)
                params = {"loss.alpha": alpha}
                if (loss, alpha, seed) == ("tversky", 0.6, 1):
                    log.trial(None, loss=loss, seed=seed, params=params, outcome=names.FAILED, history=[])
                elif (loss, alpha, seed) == ("dice", 0.1, 3):
                    log.trial(None, loss=loss, seed=seed, params=params)  # no best_dev_f1: missing
                else:
                    run_id = log.trial(value, loss=loss, seed=seed, params=params)
                    if (loss, alpha, seed) == ("dice", 0.6, 0):
                        degenerate = run_id
    for seed in range(3):  # a second data variant: its own arena and its own lines
        log.trial(0.6 + 0.01 * seed, loss="dice", variant="+positive", seed=seed, params={"loss.alpha": 0.3})
        log.trial(0.58 + 0.02 * seed, loss="ce", variant="+positive", seed=seed, params={"loss.alpha": 0.3})
    log.client.set_tag(degenerate, names.DEGENERATE, "every prediction is 0")
    return load_runs("grid", module_tracking_uri)


def test_t_intervals_equal_t_interval_group_by_group():
    rng = np.random.default_rng(0)
    groups = [rng.normal(70, 3, size) for size in (0, 1, 2, 3, 5, 8, 40)]
    groups += [np.array([71.0, 71.0, 71.0]), np.array([70.0, math.nan, 72.0, math.inf]), np.array([math.nan])]
    for confidence in (0.95, 0.9):
        together = t_intervals(groups, confidence)
        assert together == [t_interval(group, confidence) for group in groups]  # exact, field by field


def _old_partner(finder: BaselineFinder, rows: pd.DataFrame) -> Configuration | None:
    """BaselineFinder.partner as it was written per point."""
    first = rows.iloc[0]
    variant = first[VARIANT] if finder.key != VARIANT else "all"
    found = finder._arenas.get((first["experiment"], first[TASK], first["metric"], variant))
    if found is None or finder.key not in rows:
        return None
    columns, baselines = found
    if rows[finder.key].map(lambda value: _matches(value, finder.options.baseline_value)).any():
        return None
    settings = {c: rows[c].iloc[0] for c in columns if rows[c].nunique(dropna=False) == 1}
    usable = rows.loc[rows["usable"], "value"]
    loss, variant = str(first[LOSS]), str(first[VARIANT])
    point = Configuration("", loss, variant, settings, rows, usable.mean(), len(usable))
    return _partner(point, baselines, finder.key)


@pytest.mark.parametrize("options", [AnalysisOptions(), AnalysisOptions(test="t", confidence=0.9)])
def test_curve_points_equal_the_per_point_computation(runs, options):
    obs = observations(runs, options)
    lines = list(curve_lines(obs, runs))
    curves = curves_from_lines(lines, obs, runs, options)
    finder = BaselineFinder(obs, runs.param_columns, options)
    expected = []
    for line in lines:
        for x, cell in line.trials.groupby(line.param.name, sort=True):
            interval = t_interval(cell.loc[cell["usable"], "value"], options.confidence)
            partner = _old_partner(finder, cell)
            result = None
            if partner is not None:  # dicelab.stats.compare on this one pair, no batching
                own, theirs = seed_values(cell), seed_values(partner.rows)
                result = compare(own, theirs, confidence=options.confidence, test=options.test)
            expected.append(
                {
                    "line": line.label,
                    "loss": line.loss,
                    "x": x,
                    "unit": cell["unit"].iloc[0],
                    "n": interval.n,
                    **exclusion_counts(cell, options),
                    "mean": interval.mean,
                    "std": interval.std,
                    "ci_low": interval.low,
                    "ci_high": interval.high,
                    "baseline": partner.label if partner is not None else "",
                    "delta": result.difference if result else math.nan,
                    "delta_low": result.low if result else math.nan,
                    "delta_high": result.high if result else math.nan,
                    "delta_paired": result.paired if result else False,
                    "delta_p": result.p_value if result else math.nan,
                }
            )
    expected = pd.DataFrame(expected)
    # the fixture's cases are all there: failed, missing, degenerate, baseline points, compared points
    assert expected[["n_failed", "n_missing", "n_degenerate"]].sum().tolist() == [1, 1, 1]
    assert (expected["baseline"] == "").sum() >= 3 and expected["delta"].notna().sum() >= 6
    pd.testing.assert_frame_equal(curves[list(expected.columns)], expected, check_exact=True)


def test_decisions_reuse_the_finders_configurations_and_size_seeds_row_by_row(runs):
    options = AnalysisOptions(detect=0.5)
    obs = observations(runs, options)
    finder = BaselineFinder(obs, runs.param_columns, options)
    shared = decisions_from_observations(obs, runs, options, finder)
    alone = decisions_from_observations(obs, runs, options)
    pd.testing.assert_frame_equal(shared.comparisons, alone.comparisons, check_exact=True)
    pd.testing.assert_frame_equal(shared.arenas, alone.arenas, check_exact=True)
    table = shared.comparisons
    undecided = table[table["verdict"] == NO_DIFFERENCE]
    assert len(undecided) >= 5 and table.loc[table["verdict"] != NO_DIFFERENCE, "seeds_needed"].isna().all()
    for row in undecided.itertuples():
        alpha = options.alpha / row.family
        expected = seeds_needed(row.std_difference, row.detect, alpha=alpha, paired=row.paired)
        assert (pd.isna(row.seeds_needed) and expected is None) or row.seeds_needed == expected
