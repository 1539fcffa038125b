"""Hyperparameter importance with Optuna's PED-ANOVA and fANOVA evaluators, on a study built from the runs."""

from __future__ import annotations

import contextlib
import copy
import datetime
import warnings
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
import pandas as pd
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.importance import FanovaImportanceEvaluator, PedAnovaImportanceEvaluator, get_param_importances
from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from dicelab.analysis.design import swept_params
from dicelab.analysis.observations import LOSS, SEED, TASK, VARIANT, AnalysisOptions, observations
from dicelab.analysis.runs import RunSet

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
    # PED-ANOVA contrasts the top quantile with all trials; keep at least 3 trials in the top.
    quantile = min(0.5, max(0.1, 3 / n_trials))
    return [
        ("PED-ANOVA", PedAnovaImportanceEvaluator(target_quantile=quantile)),
        ("fANOVA", FanovaImportanceEvaluator(n_trees=FANOVA_TREES, max_depth=FANOVA_DEPTH, seed=0)),
    ]


def _study(trials: pd.DataFrame, params: list[str]) -> optuna.Study:
    """The trials as a maximizing Optuna study: trial i is row i, numbered i (as `add_trials` on a new
    in-memory study numbers them), each holding its params and value, over distributions from the data."""
    distributions = {param: _distribution(trials[param]) for param in params}
    now = datetime.datetime.now()
    frozen = [
        FrozenTrial(
            number=number,
            state=TrialState.COMPLETE,
            value=float(row["value"]),
            datetime_start=now,
            datetime_complete=now,
            params={param: _param_value(row[param], distributions[param]) for param in params},
            distributions=distributions,
            user_attrs={},
            system_attrs={},
            intermediate_values={},
            trial_id=number,
        )
        for number, row in enumerate(trials[[*params, "value"]].to_dict("records"))
    ]
    with _quiet_optuna():
        return optuna.Study(_STUDY, storage=_TrialsStorage(frozen))


_STUDY = "importance"


class _TrialsStorage(BaseStorage):
    """A read-only Optuna storage of one maximizing study and its finished trials, kept as given.

    What the importance evaluators read of a study is its direction and its completed trials. Adding 1,000
    trials to an in-memory study deep-copies each (a third of a 1,000-trial importance's time, for trials
    nothing changes afterwards); this storage hands out the trials it was built with (copies only when
    asked for them, as `get_all_trials(deepcopy=True)`)."""

    def __init__(self, trials: Sequence[FrozenTrial]) -> None:
        self._trials = list(trials)

    def get_study_id_from_name(self, study_name: str) -> int:
        if study_name != _STUDY:
            raise KeyError(study_name)
        return 0

    def get_study_name_from_id(self, study_id: int) -> str:
        self._check(study_id)
        return _STUDY

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        self._check(study_id)
        return [StudyDirection.MAXIMIZE]

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        self._check(study_id)
        return {}

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        self._check(study_id)
        return {}

    def get_trial(self, trial_id: int) -> FrozenTrial:
        if not 0 <= trial_id < len(self._trials):
            raise KeyError(trial_id)
        return self._trials[trial_id]

    def get_all_trials(
        self, study_id: int, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> list[FrozenTrial]:
        self._check(study_id)
        trials = [t for t in self._trials if states is None or t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials

    @staticmethod
    def _check(study_id: int) -> None:
        if study_id != 0:
            raise KeyError(study_id)

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the importance's study is read-only")

    create_new_study = _read_only
    get_all_studies = _read_only  # Optuna's FrozenStudy is not public; nothing here lists studies
    delete_study = _read_only
    set_study_user_attr = _read_only
    set_study_system_attr = _read_only
    create_new_trial = _read_only
    set_trial_param = _read_only
    set_trial_state_values = _read_only
    set_trial_intermediate_value = _read_only
    set_trial_user_attr = _read_only
    set_trial_system_attr = _read_only


def _distribution(values: pd.Series) -> BaseDistribution:
    if not pd.api.types.is_numeric_dtype(values):
        return CategoricalDistribution(sorted(values.astype(str).unique()))
    low, high = float(values.min()), float(values.max())
    if np.allclose(values, np.round(values)):
        return IntDistribution(round(low), round(high))
    # Learning-rate-like ranges spanning two decades or more are compared on a log scale.
    return FloatDistribution(low, high, log=low > 0 and high / low >= 100)


def _param_value(value: Any, distribution: BaseDistribution) -> Any:
    if isinstance(distribution, CategoricalDistribution):
        return str(value)
    if isinstance(distribution, IntDistribution):
        return round(float(value))
    return float(value)


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Silence Optuna's info logs and experimental-feature warnings inside analysis."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)
