"""What the report draws and how it reads: checked on the plotting data and the Markdown, never on pixels."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from scipy import stats
from statsmodels.stats.multitest import multipletests

from dicelab.analysis import build_report, load_runs, plots, sensitivity_curves
from dicelab.analysis.sections import optimum_sentence

# Two seeds 20 points apart: the t-interval (±12.7 standard errors) leaves [0, 100] at alpha 0.2 and 0.6.
TVERSKY = {0.2: [0.05, 0.25], 0.4: [0.60, 0.62], 0.6: [0.85, 0.99]}


@pytest.fixture(scope="module")
def runs(module_tracking_uri, module_sweep_log):
    log = module_sweep_log("figures")  # no paper numbers in this sweep's config
    for alpha, values in TVERSKY.items():
        for seed, value in enumerate(values):
            params = {"loss.alpha": alpha, "loss.beta": round(1 - alpha, 6)}
            log.trial(value, loss="tversky", seed=seed, params=params)
    for loss, base in (("dsc", 0.70), ("ce", 0.60), ("focal", 0.65)):
        for seed in range(3):
            log.trial(base + seed / 100, loss=loss, seed=seed)
    return load_runs("figures", module_tracking_uri)


@pytest.fixture(scope="module")
def markdown(runs, tmp_path_factory):
    report = build_report(runs, tmp_path_factory.mktemp("figures") / "report", log_to_mlflow=False)
    return report.markdown.read_text(encoding="utf-8")


def tversky_figure(runs, bounds=(0.0, 100.0)):
    curves = sensitivity_curves(runs)
    rows = curves[curves["loss"] == "tversky"]
    points = pd.DataFrame({"x": [0.2], "value": [15.0], "line": [rows["line"].iloc[0]]})
    figure = plots.sensitivity_figure(
        rows, points, param="loss.alpha", relation="", y_label="F1", title="t", bounds=bounds
    )
    return rows, figure.axes[0]


def by_gid(axes, gid):
    return [collection for collection in axes.collections if collection.get_gid() == gid]


def test_the_optimum_star_is_drawn_at_the_best_mean(runs):
    rows, axes = tversky_figure(runs)
    best = rows[rows["is_optimum"]]
    (star,) = by_gid(axes, "optimum")
    assert star.get_offsets().tolist() == [[best["x"].item(), best["mean"].item()]]
    assert best["x"].item() == 0.6


def test_bands_are_cut_at_the_metric_range_and_the_cut_is_marked(runs):
    rows, axes = tversky_figure(runs)
    assert rows["ci_low"].min() < 0 and rows["ci_high"].max() > 100  # the table keeps the true interval
    (band,) = [c for c in axes.collections if isinstance(c, PolyCollection) and c.get_gid() is None]
    ys = np.concatenate([path.vertices[:, 1] for path in band.get_paths()])
    assert ys.min() == pytest.approx(0.0) and ys.max() == pytest.approx(100.0)
    marks = np.concatenate([c.get_offsets() for c in by_gid(axes, "band-cut")])
    assert sorted(map(tuple, marks.tolist())) == [(0.2, 0.0), (0.2, 100.0), (0.6, 100.0)]
    _, unbounded = tversky_figure(runs, bounds=None)
    assert not by_gid(unbounded, "band-cut")


def test_no_paper_parts_without_paper_numbers(markdown):
    assert "(paper)" not in markdown and "paper Δ" not in markdown
    assert "paper's number" not in markdown and "paper.sensitivity" not in markdown


def test_training_curves_follow_the_ablation_table_order(markdown):
    training = markdown.split("## Training curves", 1)[1].split("\n## ", 1)[0]
    headings = [line.split()[1] for line in training.splitlines() if line.startswith("### ")]
    assert headings == ["ce", "focal", "tversky", "dsc"]  # the paper's loss order, not alphabetical


def test_importance_rows_are_ranked_within_each_scope(markdown):
    section = markdown.split("## Hyperparameter importance", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    body = [(row[0].strip("| "), float(row[2]) + float(row[3].strip(" |"))) for row in rows[1:]]
    assert body, section
    for scope in dict.fromkeys(name for name, _ in body):
        scores = [score for name, score in body if name == scope]
        assert scores == sorted(scores, reverse=True), scope


@pytest.mark.parametrize(
    ("means", "lows", "highs", "phrase"),
    [
        ([80, 70], [78, 60], [82, 79], "its interval overlaps the other value's"),
        ([80, 70], [78, 60], [82, 75], "clearly ahead of the other value"),
        ([80, 70, 60], [78, 60, 50], [82, 79, 65], "its interval overlaps those of 1 of the 2 other values"),
        ([80, 70, 60], [70, 60, 50], [90, 79, 75], "its interval overlaps those of both other values"),
        ([80, 70, 60, 50], [70, 60, 50, 40], [90, 79, 75, 71], "overlaps those of all 3 other values"),
        (
            [80, 70, 60],
            [78, 60, 50],
            [82, 75, 65],
            "clearly ahead: no other value's interval overlaps its own",
        ),
    ],
)
def test_the_optimum_is_described_in_words(means, lows, highs, phrase):
    rows = pd.DataFrame(
        {
            "line": "original",
            "x": [0.1 * (i + 1) for i in range(len(means))],
            "mean": means,
            "ci_low": lows,
            "ci_high": highs,
            "n": 3,
            "is_optimum": [True] + [False] * (len(means) - 1),
        }
    )
    assert optimum_sentence(rows, "loss.alpha").endswith(phrase)


def test_sensitivity_points_carry_their_paired_difference_to_the_baseline(runs):
    rows, axes = tversky_figure(runs)
    ce = {seed: 60.0 + seed for seed in range(3)}  # the fixture's ce trials, in percent
    for x, values in TVERSKY.items():
        point = rows.set_index("x").loc[x]
        differences = [100 * value - ce[seed] for seed, value in enumerate(values)]
        expected = stats.ttest_rel([100 * v for v in values], [ce[0], ce[1]]).confidence_interval(0.95)
        assert point["baseline"] == "ce" and point["delta_paired"]
        assert point["delta"] == pytest.approx(np.mean(differences))
        assert (point["delta_low"], point["delta_high"]) == pytest.approx((expected.low, expected.high))
    assert rows["delta_p_holm"].tolist() == pytest.approx(multipletests(rows["delta_p"], method="holm")[1])
    lower = axes.figure.axes[1]
    (paired,) = [line for line in lower.lines if line.get_gid() == "paired"]
    assert paired.get_ydata().tolist() == pytest.approx(rows.sort_values("x")["delta"].tolist())


def test_training_curves_tick_whole_optimizer_steps():
    curves = pd.DataFrame({"config": ["a"] * 3, "step": [1, 2, 3], "mean": [0.5, 0.6, 0.7], "n": [2] * 3})
    figure = plots.training_curves_figure(curves, y_label="dev F1 (%)", title="ce: dev F1")
    ticks = figure.axes[0].get_xticks()
    assert len(ticks) >= 2 and all(float(tick).is_integer() for tick in ticks), ticks
