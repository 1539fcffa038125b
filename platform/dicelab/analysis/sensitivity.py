"""Sensitivity curves: the metric against each swept hyperparameter, mean over seeds with a t-interval."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dicelab.analysis.comparisons import (
    STATISTICS_COLUMNS,
    BaselineFinder,
    Configuration,
    arena_mode,
    compare_trials_many,
)
from dicelab.analysis.design import SweptParam, config_label, swept_params
from dicelab.analysis.intervals import t_intervals
from dicelab.analysis.observations import (
    DEGENERATE,
    LOSS,
    TASK,
    VARIANT,
    VARIANT_ORDER,
    AnalysisOptions,
    observations,
    paper_order,
)
from dicelab.analysis.paper import PaperNumbers
from dicelab.analysis.runs import RunSet
from dicelab.stats import Comparison, holm

# Another swept param with at most this many values splits the curves into lines; one with more values
# (a random search over it) is averaged over, and the curve says so in `averaged_over`.
MAX_LINE_VALUES = 6
CURVE_COLUMNS = [
    "experiment",
    "task",
    "metric",
    "unit",
    "loss",
    "param",
    "relation",
    "line",
    "variant",
    "conditions",
    "averaged_over",
    "x",
    "n",
    "n_failed",
    "n_degenerate",
    "n_missing",
    "mean",
    "std",
    "ci_low",
    "ci_high",
    "is_optimum",
    "paper",
    "baseline",  # the configuration the point is compared with, paired on seeds (dicelab.stats.compare)
    "delta",
    "delta_low",
    "delta_high",
    "delta_paired",
    "delta_p",
    "delta_p_holm",  # Holm over the points of one figure
]


@dataclass(frozen=True)
class CurveLine:
    """One line of a sensitivity figure: the trials of one experiment x variant x other-param setting."""

    task: str
    metric: str
    loss: str
    param: SweptParam
    averaged_over: str  # other swept params pooled into this line (too many values to split on)
    experiment: str
    variant: str
    conditions: str  # the other swept params' values that define this line, e.g. "learning_rate=2e-05"
    label: str
    trials: pd.DataFrame  # observations with a value of `param`

    @property
    def figure(self) -> tuple[str, str, str, str]:
        return self.task, self.metric, self.loss, self.param.name


def sensitivity_curves(runs: RunSet, options: AnalysisOptions | None = None) -> pd.DataFrame:
    """One row per (curve, hyperparameter value): n, mean, std, ci_low/ci_high, is_optimum, paper.

    A curve is a (task, metric, loss, swept param) figure's line: one per experiment x data variant x
    value of any other swept param with few values. `n` counts the usable seeds; failed trials and
    degenerate trials and missing / NaN metrics are counted in `n_failed`, `n_degenerate` and `n_missing`,
    never averaged in.
    """
    options = options or AnalysisOptions()
    obs = observations(runs, options)
    return curves_from_lines(curve_lines(obs, runs), obs, runs, options)


def curve_lines(obs: pd.DataFrame, runs: RunSet) -> Iterator[CurveLine]:
    several_experiments = obs["experiment"].nunique() > 1
    for (task, metric, loss), group in obs.groupby([TASK, "metric", LOSS], sort=True):
        params = swept_params(group, runs.param_columns)
        for param in params:
            others = [other.name for other in params if other is not param]
            splits = [name for name in others if group[name].nunique() <= MAX_LINE_VALUES]
            averaged = ", ".join(name for name in others if name not in splits)
            lines = group.groupby(["experiment", VARIANT, *splits], sort=True, dropna=False)
            # Lines in the paper's variant order (original first), then by the other params.
            lines = sorted(lines, key=lambda item: (item[0][0], paper_order(item[0][1], VARIANT_ORDER)))
            for line_values, line in lines:
                experiment, variant, *split_values = line_values
                conditions = config_label(zip(splits, split_values, strict=True))
                label = " · ".join(
                    part for part in (experiment if several_experiments else "", variant, conditions) if part
                )
                yield CurveLine(
                    str(task),
                    str(metric),
                    str(loss),
                    param,
                    averaged,
                    str(experiment),
                    str(variant),
                    conditions,
                    label,
                    line[line[param.name].notna()],
                )


def curves_from_lines(
    lines: Iterable[CurveLine],
    obs: pd.DataFrame,
    runs: RunSet,
    options: AnalysisOptions,
    baselines: BaselineFinder | None = None,
) -> pd.DataFrame:
    """`baselines`: one built on the same observations and options (else built here)."""
    lines = list(lines)
    baselines = baselines or BaselineFinder(obs, runs.param_columns, options)
    variants: dict[tuple[str, str, str], set[str]] = {}
    for line in lines:
        variants.setdefault((line.experiment, line.task, line.loss), set()).add(line.variant)
    rows: list[dict[str, Any]] = []
    for line in lines:
        paper = _paper_for_line(runs, line, variants[(line.experiment, line.task, line.loss)])
        rows += _line_points(line, paper, baselines, options)
    curves = pd.DataFrame(rows, columns=CURVE_COLUMNS)
    if not curves.empty:
        figure_keys = ["task", "metric", "loss", "param"]
        curves["delta_p_holm"] = curves.groupby(figure_keys, sort=False)["delta_p"].transform(
            lambda p: pd.Series(holm(p.tolist()), index=p.index)
        )
        # The optimum of a line is its point with the best mean (the highest; the lowest for a metric the
        # trials minimised, train.mode min), when no other point ties with it.
        line_keys = ["task", "metric", "loss", "param", "line"]
        means = curves.groupby(line_keys, sort=False)["mean"]
        lowest = curves["metric"].map(lambda metric: arena_mode(obs[obs["metric"] == metric]) == "min")
        top = curves["mean"] == means.transform("max").where(~lowest, means.transform("min"))
        curves["is_optimum"] = top & (top.groupby([curves[key] for key in line_keys]).transform("sum") == 1)
    return curves


def _line_points(
    line: CurveLine, paper: PaperNumbers | None, baselines: BaselineFinder, options: AnalysisOptions
) -> list[dict[str, Any]]:
    """A row per value of the line's param (its trials grouped as `groupby(param, sort=True)` would), each
    column computed for the whole line at once: a pandas group per point cost milliseconds, and a
    1,000-trial sweep of 40 swept values has 200 points."""
    trials = line.trials
    codes, xs = pd.factorize(trials[line.param.name], sort=True)
    if not len(xs):
        return []
    order = np.argsort(codes, kind="stable")  # each cell's rows in the line's order, as a group keeps them
    cells = np.split(order, np.cumsum(np.bincount(codes, minlength=len(xs)))[:-1])
    usable = trials["usable"].to_numpy(dtype=bool)
    values = trials["value"].to_numpy(dtype=float)
    units = trials["unit"].to_numpy()
    intervals = t_intervals([values[cell][usable[cell]] for cell in cells], options.confidence)
    # exclusion_counts' three masks, for every trial of the line
    failed = ~trials["outcome"].isin(options.counted_outcomes).to_numpy(dtype=bool)
    degenerate = ~failed & (trials["exclusion"] == DEGENERATE).to_numpy(dtype=bool)
    missing = ~failed & ~degenerate & ~usable
    partners = baselines.partners(trials, cells)
    statistics = trials[[column for column in STATISTICS_COLUMNS if column in trials]]
    compared = [(statistics.iloc[cell], p.trials) for cell, p in zip(cells, partners, strict=True) if p]
    results = iter(compare_trials_many(compared, options))
    points = []
    for x, cell, interval, partner in zip(xs.tolist(), cells, intervals, partners, strict=True):
        points.append(
            {
                "experiment": line.experiment,
                "task": line.task,
                "metric": line.metric,
                "unit": units[cell[0]],
                "loss": line.loss,
                "param": line.param.name,
                "relation": line.param.relation,
                "line": line.label,
                "variant": line.variant,
                "conditions": line.conditions,
                "averaged_over": line.averaged_over,
                "x": x,
                "n": interval.n,
                "n_failed": int(failed[cell].sum()),
                "n_degenerate": int(degenerate[cell].sum()),
                "n_missing": int(missing[cell].sum()),
                "mean": interval.mean,
                "std": interval.std,
                "ci_low": interval.low,
                "ci_high": interval.high,
                "is_optimum": False,
                "paper": paper.sensitivity_at(line.loss, float(x)) if paper else math.nan,
                **_against_baseline(partner, next(results) if partner else None),
            }
        )
    return points


def _against_baseline(partner: Configuration | None, result: Comparison | None) -> dict[str, Any]:
    if partner is None or result is None:
        return {"baseline": "", "delta": math.nan, "delta_low": math.nan, "delta_high": math.nan,
                "delta_paired": False, "delta_p": math.nan}  # fmt: skip
    return {
        "baseline": partner.label,
        "delta": result.difference,
        "delta_low": result.low,
        "delta_high": result.high,
        "delta_paired": result.paired,
        "delta_p": result.p_value,
    }


def _paper_for_line(runs: RunSet, line: CurveLine, variants: set[str]) -> PaperNumbers | None:
    """The paper's sensitivity numbers apply to a line for a loss with one numeric swept hyperparameter,
    on the original data (or the experiment's only variant), when the paper's metric is this metric."""
    paper = runs.papers.get(line.experiment)
    if paper is None or not paper.applies_to(line.metric) or line.loss not in paper.sensitivity:
        return None
    if not line.param.numeric or line.averaged_over or line.conditions:
        return None
    if line.variant != "original" and len(variants) > 1:
        return None
    return paper
