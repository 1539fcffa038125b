"""Which swept hyperparameters move together: a tie folds into its leader, independent draws do not."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dicelab.analysis.design import swept_params

ALPHA = np.array([0.15, 0.3, 0.45, 0.6, 0.8])


def _swept(beta: np.ndarray) -> list[tuple[str, tuple[str, ...], str]]:
    frame = pd.DataFrame({"loss.alpha": np.repeat(ALPHA, 2), "loss.beta": np.repeat(beta, 2)})  # 2 seeds each
    return [(p.name, p.followers, p.relation) for p in swept_params(frame, ["loss.alpha", "loss.beta"])]


def test_a_tie_on_a_line_folds_into_its_leader():
    assert _swept(1.0 - ALPHA) == [("loss.alpha", ("loss.beta",), "beta = 1 − alpha")]
    assert _swept(ALPHA.copy()) == [("loss.alpha", ("loss.beta",), "beta = alpha")]
    assert _swept(2 * ALPHA + 0.1) == [("loss.alpha", ("loss.beta",), "beta set with alpha")]


def test_independent_draws_are_two_parameters_though_each_draw_is_new():
    """A random search over two ranges: every alpha has its one beta, by chance, not by a tie."""
    draws = np.random.default_rng(0).uniform(1e-4, 1e-3, len(ALPHA))
    assert _swept(draws) == [("loss.alpha", (), ""), ("loss.beta", (), "")]
    assert _swept(ALPHA**2) == [("loss.alpha", (), ""), ("loss.beta", (), "")]  # tied, but not on a line


def test_two_values_cannot_tell_and_fold():
    frame = pd.DataFrame({"loss.alpha": [0.3, 0.3, 0.7, 0.7], "loss.beta": [0.2, 0.2, 0.9, 0.9]})
    (param,) = swept_params(frame, ["loss.alpha", "loss.beta"])
    assert param.followers == ("loss.beta",)
