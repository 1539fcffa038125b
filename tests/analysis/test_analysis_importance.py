"""The report's fANOVA forest (fewer, shallower trees than Optuna's default) against Optuna's default."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pandas as pd
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.importance import FanovaImportanceEvaluator, get_param_importances

from dicelab.analysis.importance import FANOVA_DEPTH, FANOVA_TREES, _evaluators, _quiet_optuna, _study

LOSSES = ("ce", "focal", "dice", "dsc", "tversky")


def _sweep_study(alphas: int = 20, seeds: int = 3) -> optuna.Study:
    """A grid like a real sweep's: losses x alpha values x seeds, with a loss effect, a smooth alpha effect,
    a small seed effect and noise."""
    rng = np.random.default_rng(0)
    distributions = {
        "loss.name": CategoricalDistribution(LOSSES),
        "loss.alpha": FloatDistribution(0.0, 1.0),
        "train.seed": IntDistribution(0, seeds - 1),
    }
    trials = []
    for loss_index, loss in enumerate(LOSSES):
        for alpha in np.linspace(0.0, 1.0, alphas):
            for seed in range(seeds):
                value = 0.02 * loss_index + 0.05 * math.sin(6 * alpha) + 0.005 * seed + rng.normal(0, 0.01)
                params = {"loss.name": loss, "loss.alpha": float(alpha), "train.seed": seed}
                trials.append(
                    optuna.trial.create_trial(params=params, distributions=distributions, value=value)
                )
    with _quiet_optuna():
        study = optuna.create_study(direction="maximize")
        study.add_trials(trials)
    return study


def _importances(
    study: optuna.Study, evaluator: optuna.importance.BaseImportanceEvaluator
) -> dict[str, float]:
    with _quiet_optuna():
        return {
            k: float(v) for k, v in get_param_importances(study, evaluator=evaluator, normalize=True).items()
        }


def test_the_reports_fanova_forest_is_small():
    [(_, fanova)] = [pair for pair in _evaluators(300) if pair[0] == "fANOVA"]
    assert isinstance(fanova, FanovaImportanceEvaluator)
    forest = fanova._evaluator._forest  # Optuna's scikit-learn forest: its size is what the report states
    assert (forest.n_estimators, forest.max_depth) == (FANOVA_TREES, FANOVA_DEPTH) == (16, 6)


def test_the_small_forest_gives_optunas_default_importances():
    study = _sweep_study()
    [(_, fanova)] = [pair for pair in _evaluators(len(study.trials)) if pair[0] == "fANOVA"]
    small = _importances(study, fanova)
    default = _importances(study, FanovaImportanceEvaluator(seed=0))
    reseeded = _importances(study, FanovaImportanceEvaluator(seed=1))
    assert list(small) == list(default) == ["loss.alpha", "loss.name", "train.seed"]  # the same ranking
    between_seeds = max(abs(default[p] - reseeded[p]) for p in default)
    for param, score in default.items():
        assert small[param] == pytest.approx(score, abs=max(0.03, 2 * between_seeds)), param


def _sweep_trials(alphas: int = 10, seeds: int = 3) -> pd.DataFrame:
    """The same kind of grid as a trials table (one row per trial), as the report's importance reads it."""
    rows = []
    study = _sweep_study(alphas, seeds)
    for trial in study.trials:
        rows.append({**trial.params, "value": trial.value})
    return pd.DataFrame(rows)


def test_the_importance_study_gives_what_a_study_of_added_trials_gives():
    """The report's study (its trials kept as built, not deep-copied trial by trial as `add_trials` does)
    gives the importances, to the last bit, of an in-memory study the same trials were added to."""
    trials = _sweep_trials()
    params = ["loss.name", "loss.alpha", "train.seed"]
    ours = _study(trials, params)
    distributions = {p: t for p, t in ours.trials[0].distributions.items()}
    with _quiet_optuna():
        reference = optuna.create_study(direction="maximize")
        reference.add_trials(
            optuna.trial.create_trial(params=t.params, distributions=distributions, value=t.value)
            for t in ours.trials
        )
    assert [(t.number, t.params, t.value) for t in ours.trials] == [
        (t.number, t.params, t.value) for t in reference.trials
    ]
    for name, evaluator in _evaluators(len(trials)):
        with _quiet_optuna():
            got = get_param_importances(ours, evaluator=evaluator, params=params, normalize=True)
        for name_again, evaluator_again in _evaluators(len(trials)):  # a fresh evaluator: the same seed
            if name_again == name:
                with _quiet_optuna():
                    expected = get_param_importances(
                        reference, evaluator=evaluator_again, params=params, normalize=True
                    )
        assert list(got.items()) == list(expected.items()), name


def test_the_importance_study_does_not_copy_each_trial():
    """Every trial of the report's study holds the one distributions mapping it was built with: nothing
    deep-copied the trials (about a third of a 1,000-trial importance's time did)."""
    trials = _sweep_trials()
    study = _study(trials, ["loss.name", "loss.alpha", "train.seed"])
    built = study.get_trials(deepcopy=False)
    assert len(built) == len(trials)
    assert all(trial.distributions is built[0].distributions for trial in built)
    assert [trial.number for trial in built] == list(range(len(trials)))
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    with pytest.raises(NotImplementedError):
        study.add_trial(built[0])  # read-only: what the evaluators read, nothing more
