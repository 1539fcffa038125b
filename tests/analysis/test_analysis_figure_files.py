"""How figures are written: one Agg draw gives the same PNG as matplotlib's savefig (which draws twice)."""

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.image import imread

from dicelab.analysis import plots


def _curves(values: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One sensitivity line over `values` alpha values, 3 seeds each, with a paired difference panel."""
    x = np.round(np.linspace(0.0, 0.039, values), 3)
    mean = 60 + 5 * np.sin(x * 100)
    curves = pd.DataFrame(
        {
            "line": "original",
            "x": x,
            "mean": mean,
            "ci_low": mean - 2,
            "ci_high": mean + 2,
            "is_optimum": mean == mean.max(),
            "paper": np.nan,
            "delta": mean - 60,
            "delta_low": mean - 62,
            "delta_high": mean - 58,
            "baseline": "ce",
        }
    )
    points = pd.DataFrame(
        {
            "line": "original",
            "x": np.repeat(x, 3),
            "value": np.repeat(mean, 3) + np.tile([-1.0, 0.0, 1.0], values),
        }
    )
    return curves, points


def _figure(values: int) -> Figure:
    curves, points = _curves(values)
    return plots.sensitivity_figure(
        curves,
        points,
        param="loss.alpha",
        relation="",
        y_label="F1 (%)",
        title="dice: F1 vs alpha",
        bounds=(0, 100),
    )


def test_a_saved_figure_is_the_png_savefig_writes(tmp_path):
    ours = imread(plots.save_figure(_figure(8), tmp_path / "ours.png"))
    reference = tmp_path / "savefig.png"
    _figure(8).savefig(reference, dpi=plots.DPI, format="png")
    theirs = imread(reference)
    assert ours.shape == theirs.shape == (plots.HEIGHT * plots.DPI, plots.WIDTH * plots.DPI, 4)
    assert np.array_equal(ours, theirs)


def test_many_swept_values_get_evenly_spread_tick_labels():
    few, many = _figure(plots.MAX_X_TICKS), _figure(40)
    assert len(few.axes[0].get_xticks()) == plots.MAX_X_TICKS
    ticks = many.axes[0].get_xticks()
    x = _curves(40)[0]["x"]
    assert len(ticks) == plots.MAX_X_TICKS and ticks[0] == x.min() and ticks[-1] == x.max()
    assert set(ticks) <= set(x)  # each label names a swept value


def test_a_baseline_per_point_is_named_by_its_rule_not_listed():
    curves, points = _curves(40)
    curves["baseline"] = [f"ce · alpha={x}" for x in curves["x"]]  # ce at each alpha, as a sweep pairs them
    figure = plots.sensitivity_figure(
        curves, points, param="loss.alpha", relation="", y_label="F1 (%)", title="t", bounds=(0, 100)
    )
    label = figure.axes[1].get_ylabel()
    assert "alpha=" not in label and "baseline" in label
    one = _figure(8).axes[1].get_ylabel()
    assert one.startswith("Δ vs ce")
