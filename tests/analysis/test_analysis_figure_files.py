"""How figures are written: one Agg draw gives the same PNG as matplotlib's savefig (which draws twice)."""

import itertools

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


def test_the_fixed_layout_keeps_every_label_inside_the_figure_and_clear_of_the_legend(tmp_path):
    """Sensitivity and training-curve figures have fixed margins (no constrained layout): their tick
    labels, axis labels and titles stay inside the figure, and the legend, however long, beside the axes
    (a title longer than the axes are wide may reach under the legend, as under constrained layout)."""
    curves, points = _curves(40)
    curves["line"] = "+positive+negative · gamma=2"  # a long legend label
    points["line"] = curves["line"].iloc[0]
    sensitivity = plots.sensitivity_figure(
        curves, points, param="loss.alpha", relation="beta = 1 − alpha", y_label="best dev F1 (%)",
        title="dice: best dev F1 (%) vs alpha\ntask pair_classification · band: 95% t-interval",
        bounds=(0, 100),
    )  # fmt: skip
    steps = pd.DataFrame(
        {"config": np.repeat([f"alpha={a} · gamma=2" for a in range(10)], 3), "step": [100, 200, 300] * 10}
    )
    steps["mean"], steps["n"] = 0.7 + 0.01 * np.arange(30), 5
    label = "dev F1 (%), mean over seeds"
    training = plots.training_curves_figure(steps, y_label=label, title="dice: dev F1")
    for figure in (sensitivity, training):
        plots.save_figure(figure, tmp_path / "figure.png")
        renderer = figure.canvas.get_renderer()
        inside = figure.bbox
        (legend,) = figure.legends
        for axes in figure.axes:
            box = axes.get_tightbbox(renderer)
            assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            assert axes.get_window_extent(renderer).x1 <= legend.get_window_extent(renderer).x0
        stacked = sorted(figure.axes, key=lambda axes: axes.get_position().y0)
        for lower, upper in itertools.pairwise(stacked):  # stacked panels do not overlap
            assert lower.get_tightbbox(renderer).y1 <= upper.get_window_extent(renderer).y0


def test_sampled_values_closer_than_a_label_get_no_overlapping_labels():
    """A random search's values (0.60, 2.02, 2.09, 2.53): 2.02 and 2.09 are closer than a label's width."""
    curves, points = _curves(4)
    sampled = dict(zip(sorted(curves["x"].unique()), [0.602434, 2.01659, 2.0924, 2.53318], strict=True))
    curves["x"], points["x"] = curves["x"].map(sampled), points["x"].map(sampled)
    figure = plots.sensitivity_figure(
        curves, points, param="loss.gamma", relation="", y_label="F1 (%)", title="focal", bounds=(0, 100)
    )
    assert figure.axes[0].get_xticks().tolist() == [0.602434, 2.01659, 2.53318]
    line = next(line for line in figure.axes[0].lines if len(line.get_xdata()) == 4)
    assert sorted(line.get_xdata()) == sorted(sampled.values())  # every value still has its point
