"""The report's fANOVA forest (fewer, shallower trees than Optuna's default) against Optuna's default."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.importance import FanovaImportanceEvaluator, get_param_importances

from dicelab.analysis.importance import FANOVA_DEPTH, FANOVA_TREES, _evaluators, _quiet_optuna

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
