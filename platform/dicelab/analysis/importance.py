"""Hyperparameter importance with Optuna's PED-ANOVA and fANOVA evaluators, on a study built from the runs."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dicelab.analysis.design import swept_params
from dicelab.analysis.observations import LOSS, SEED, TASK, VARIANT, AnalysisOptions, observations
from dicelab.analysis.runs import RunSet

# Optuna (with scikit-learn, for fANOVA's forest) is imported where it is used: a report computes its
# importance in a forked child (`ReportContext`), which then imports it off the report's own path.
if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

MIN_TRIALS = 6  # below this, any importance is noise
MAX_TRIALS = 1000  # fANOVA's trees grow with the trials; a fixed-seed sample keeps a scope to seconds
# fANOVA's forest. Optuna's default (64 trees of depth <= 64) grows about a leaf per trial, and computing the
# marginal variances costs leaves x a parameter's distinct values: 12.5 CPU-s for one 1,000-trial scope with
# 40 alpha values. 16 trees of depth <= 6 (<= 64 leaves each) took 0.3 s there and gave the same ranking and
# importances within 0.02 of the default's, about the default's own spread between forest seeds (checked in
# tests/analysis/test_analysis_importance.py: the same ranking, within twice that spread).
FANOVA_TREES, FANOVA_DEPTH = 16, 6
ALL_LOSSES = "all losses"
IMPORTANCE_COLUMNS = ["experiment", "task", "metric", "scope", "trials", "evaluator", "param", "importance"]


@dataclass
class Importance:
    table: pd.DataFrame  # IMPORTANCE_COLUMNS; importances of one (scope, evaluator) sum to 1
    notes: list[str] = field(default_factory=list)  # scopes skipped, and why


def parameter_importance(runs: RunSet, options: AnalysisOptions | None = None) -> Importance:
    """Importance of each varied param (seed included, as a yardstick for noise) on the usable trials.

    Scopes: all losses of a task together (loss.name, data.variant, seed and params every loss shares),
    then each loss that varied more than its seed, alone with its own swept hyperparameters.
    """
    options = options or AnalysisOptions()
    return importance_from_observations(observations(runs, options), runs)


def importance_from_observations(obs: pd.DataFrame, runs: RunSet) -> Importance:
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for (experiment, task, metric), group in obs.groupby(["experiment", TASK, "metric"], sort=True):
        for scope, trials, candidates in _scopes(group[group["usable"]], runs):
            where = f"{experiment} / {task} / {scope}"
            params = [p for p in candidates if trials[p].notna().all() and trials[p].nunique() > 1]
            if len(trials) < MIN_TRIALS:
                notes.append(f"{where}: importance skipped, {len(trials)} usable trials (needs {MIN_TRIALS})")
                continue
            if len(params) < 2:
                varied = params[0] if params else "nothing"
                notes.append(f"{where}: importance skipped, only {varied} varies")
                continue
            if trials["value"].nunique() < 2:
                notes.append(f"{where}: importance skipped, every trial has the same value")
                continue
            if len(trials) > MAX_TRIALS:
                notes.append(
                    f"{where}: importance on a random sample of {MAX_TRIALS} of {len(trials)} trials"
                )
                trials = trials.sample(MAX_TRIALS, random_state=0)
            study = _study(trials, params)
            from optuna.importance import get_param_importances

            for name, evaluator in _evaluators(len(trials)):
                try:
                    with _quiet_optuna():
                        scores = get_param_importances(
                            study, evaluator=evaluator, params=params, normalize=True
                        )
                except (RuntimeError, ValueError, ZeroDivisionError) as error:  # degenerate data for a model
                    notes.append(f"{where}: {name} could not be computed ({error})")
                    continue
                rows.extend(
                    {
                        "experiment": experiment,
                        "task": task,
                        "metric": metric,
                        "scope": scope,
                        "trials": len(trials),
                        "evaluator": name,
                        "param": param,
                        "importance": float(score),
                    }
                    for param, score in scores.items()
                )
    return Importance(pd.DataFrame(rows, columns=IMPORTANCE_COLUMNS), notes)


def _scopes(usable: pd.DataFrame, runs: RunSet) -> Iterator[tuple[str, pd.DataFrame, list[str]]]:
    shared = [
        LOSS,
        VARIANT,
        SEED,
        *(c for c in runs.param_columns if c in usable and usable[c].notna().all()),
    ]
    if usable[LOSS].nunique() > 1:
        yield ALL_LOSSES, usable, [p.name for p in swept_params(usable, shared)] + [LOSS, VARIANT, SEED]
    for loss, rows in usable.groupby(LOSS, sort=True):
        swept = [p.name for p in swept_params(rows, runs.param_columns)]
        if swept or rows[VARIANT].nunique() > 1:  # a loss that varied only its seed has nothing to rank
            yield str(loss), rows, [VARIANT, SEED, *swept]


def _evaluators(n_trials: int) -> list[tuple[str, optuna.importance.BaseImportanceEvaluator]]:
    from optuna.importance import FanovaImportanceEvaluator, PedAnovaImportanceEvaluator

    # PED-ANOVA contrasts the top quantile with all trials; keep at least 3 trials in the top.
    quantile = min(0.5, max(0.1, 3 / n_trials))
    return [
        ("PED-ANOVA", PedAnovaImportanceEvaluator(target_quantile=quantile)),
        ("fANOVA", FanovaImportanceEvaluator(n_trees=FANOVA_TREES, max_depth=FANOVA_DEPTH, seed=0)),
    ]


def _study(trials: pd.DataFrame, params: list[str]) -> optuna.Study:
    import optuna

    distributions = {param: _distribution(trials[param]) for param in params}
    with _quiet_optuna():
        study = optuna.create_study(direction="maximize")
        study.add_trials(
            optuna.trial.create_trial(
                params={param: _param_value(row[param], distributions[param]) for param in params},
                distributions=distributions,
                value=float(row["value"]),
            )
            for row in trials[[*params, "value"]].to_dict("records")
        )
    return study


def _distribution(values: pd.Series) -> BaseDistribution:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if not pd.api.types.is_numeric_dtype(values):
        return CategoricalDistribution(sorted(values.astype(str).unique()))
    low, high = float(values.min()), float(values.max())
    if np.allclose(values, np.round(values)):
        return IntDistribution(round(low), round(high))
    # Learning-rate-like ranges spanning two decades or more are compared on a log scale.
    return FloatDistribution(low, high, log=low > 0 and high / low >= 100)


def _param_value(value: Any, distribution: BaseDistribution) -> Any:
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if isinstance(distribution, CategoricalDistribution):
        return str(value)
    if isinstance(distribution, IntDistribution):
        return round(float(value))
    return float(value)


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Silence Optuna's info logs and experimental-feature warnings inside analysis."""
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)
