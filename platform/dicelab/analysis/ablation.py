"""Ablation tables (the paper's Table 8): loss x data variant, mean ± CI over seeds, delta against CE."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dicelab.analysis.comparisons import compare_trials
from dicelab.analysis.design import config_label, swept_params
from dicelab.analysis.intervals import t_interval, welch_interval
from dicelab.analysis.observations import (
    LOSS,
    LOSS_ORDER,
    TASK,
    VARIANT,
    VARIANT_ORDER,
    AnalysisOptions,
    exclusion_counts,
    observations,
    paper_order,
)
from dicelab.analysis.paper import compared_with
from dicelab.analysis.runs import RunSet
from dicelab.stats import Comparison, holm, verdict

BASELINE_LOSS = "ce"
ABLATION_COLUMNS = [
    "experiment",
    "task",
    "metric",
    "unit",
    "loss",
    "variant",
    "config",
    "configs",
    "n",
    "n_failed",
    "n_degenerate",
    "n_missing",
    "mean",
    "std",
    "ci_low",
    "ci_high",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "paper",
    "paper_delta",
    "paper_split",  # the split of dicelab's number beside the paper's (test when the paper's is, if scored)
    "paper_mean",  # that number: the cell's mean on `paper_split` (the dev mean, or test_<metric>'s)
    "paper_note",  # one sentence saying which splits the paper's and dicelab's numbers are on
    "paired",  # the paired comparison with CE of the same variant (dicelab.stats.compare)
    "n_pairs",
    "paired_delta",
    "paired_low",
    "paired_high",
    "p_value",
    "p_holm",  # Holm over the table's comparisons (one experiment, task and metric)
    "verdict",
]


def ablation_table(runs: RunSet, options: AnalysisOptions | None = None) -> pd.DataFrame:
    """One row per (experiment, task, metric, loss, variant).

    When a loss's hyperparameters were swept, its cell is the configuration with the best mean (`config`
    names it, `configs` says how many were compared; chosen on the same dev numbers, so optimistic).
    `delta` is mean - mean of the CE cell of the same variant, with a Welch t-interval; `paper` and
    `paper_delta` come from the sweep config's `paper.results`; `paper_mean` is the cell's number on the split
    the paper reports (`paper_split`: test when the paper's numbers are test numbers and the trials logged
    `test_<metric>`, else dev), and `paper_note` says which. `paired_delta` .. `verdict` compare the cell
    with CE on the seeds both ran (paired when they share 2 or more), Holm-corrected over the table.
    """
    options = options or AnalysisOptions()
    return ablation_from_observations(observations(runs, options), runs, options)


def ablation_from_observations(obs: pd.DataFrame, runs: RunSet, options: AnalysisOptions) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for (experiment, task, metric), group in obs.groupby(["experiment", TASK, "metric"], sort=True):
        paper = runs.papers.get(str(experiment))
        paper = paper if paper is not None and paper.applies_to(str(metric)) else None
        logged: set[str] = set().union(*(names for names in group.get("logged_metrics", ()) if names))
        comparand = compared_with(paper, str(metric), options.column(str(metric)), logged) if paper else None
        cells: dict[tuple[str, str], pd.DataFrame] = {}
        table_rows = []
        for loss, loss_rows in group.groupby(LOSS, sort=False):
            params = swept_params(loss_rows, runs.param_columns)
            keys = [param.name for param in params]
            shown = [name for param in params for name in (param.name, *param.followers)]
            for variant, variant_rows in loss_rows.groupby(VARIANT, sort=False):
                configs = (
                    list(variant_rows.groupby(keys, dropna=False, sort=True))
                    if keys
                    else [((), variant_rows)]
                )
                chosen = max((rows_ for _, rows_ in configs), key=lambda rows_: _mean_or_minus_inf(rows_))
                values = chosen.loc[chosen["usable"], "value"].to_numpy(dtype=float)
                cells[(str(loss), str(variant))] = chosen
                interval = t_interval(values, options.confidence)
                table_rows.append(
                    {
                        "experiment": experiment,
                        "task": task,
                        "metric": metric,
                        "unit": chosen["unit"].iloc[0],
                        "loss": loss,
                        "variant": variant,
                        "config": config_label((name, chosen[name].iloc[0]) for name in shown),
                        "configs": len(configs),
                        "n": interval.n,
                        **exclusion_counts(chosen, options),
                        "mean": interval.mean,
                        "std": interval.std,
                        "ci_low": interval.low,
                        "ci_high": interval.high,
                        "paper": paper.result(str(loss), str(variant)) if paper else math.nan,
                        "paper_split": comparand.split if comparand else "",
                        "paper_mean": _comparand_mean(chosen, comparand.column, interval.mean)
                        if comparand and comparand.split == "test"
                        else interval.mean,
                        "paper_note": comparand.note if comparand else "",
                    }
                )
        compared: list[tuple[dict[str, Any], Comparison]] = []
        for row in table_rows:
            own = cells[(str(row["loss"]), str(row["variant"]))]
            baseline = cells.get((BASELINE_LOSS, str(row["variant"])))
            delta = (
                welch_interval(_usable(own), _usable(baseline), options.confidence)
                if baseline is not None
                else (math.nan, math.nan, math.nan)
            )
            row["delta"], row["delta_ci_low"], row["delta_ci_high"] = delta
            row["paper_delta"] = (
                row["paper"] - paper.result(BASELINE_LOSS, str(row["variant"])) if paper else math.nan
            )
            row.update(dict.fromkeys(ABLATION_COLUMNS[-8:], math.nan))
            row["verdict"] = ""
            if baseline is not None and row["loss"] != BASELINE_LOSS:
                result = compare_trials(own, baseline, options)
                compared.append((row, result))
        adjusted = holm([result.p_value for _, result in compared])
        for (row, result), p_holm in zip(compared, adjusted, strict=True):
            row.update(
                paired=result.paired,
                n_pairs=result.n if result.paired else 0,
                paired_delta=result.difference,
                paired_low=result.low,
                paired_high=result.high,
                p_value=result.p_value,
                p_holm=p_holm,
                verdict=verdict(result, p_holm, alpha=options.alpha),
            )
        rows.extend(table_rows)
    table = pd.DataFrame(rows, columns=ABLATION_COLUMNS)
    order = table.assign(
        _loss=[paper_order(name, LOSS_ORDER) for name in table["loss"]],
        _variant=[paper_order(name, VARIANT_ORDER) for name in table["variant"]],
    )
    order = order.sort_values(["experiment", "task", "metric", "_loss", "_variant"], kind="stable")
    return order.drop(columns=["_loss", "_variant"]).reset_index(drop=True)


def _comparand_mean(rows: pd.DataFrame, column: str, dev_mean: float) -> float:
    """The mean of `column` (a trial's test score) over the cell's usable trials, in the value's unit."""
    if column not in rows:
        return math.nan
    usable = rows[rows["usable"]]
    values = pd.to_numeric(usable[column], errors="coerce").to_numpy(dtype=float) * usable["scale"].to_numpy()
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else math.nan


def _usable(rows: pd.DataFrame) -> np.ndarray:
    return rows.loc[rows["usable"], "value"].to_numpy(dtype=float)


def _mean_or_minus_inf(rows: pd.DataFrame) -> float:
    values = rows.loc[rows["usable"], "value"]
    return float(values.mean()) if len(values) else -math.inf
