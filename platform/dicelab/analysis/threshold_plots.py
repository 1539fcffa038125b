"""Figures of a binary classifier's decision threshold and calibration (matplotlib Figures, as plots.py).

Each takes per-trial predictions `{label: [(gold, probability), ...]}` (one pair of arrays per seed) of at
most a few configurations: each seed drawn faint, the mean over seeds bold. Scores from scikit-learn
(precision_recall_curve, f1_score, confusion_matrix) and dicelab.tasks.metrics (reliability bins).
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dicelab.analysis.plots import DPI, HEIGHT, WIDTH

Seeds = list[tuple[np.ndarray, np.ndarray]]  # per seed: gold (1 = positive), P(positive)
RECALL_GRID = np.linspace(0.0, 1.0, 101)
THRESHOLD_GRID = np.linspace(0.01, 0.99, 99)
_COLORS = ("C0", "C3", "C2", "C1")


def interpolated_precision(gold: np.ndarray, probability: np.ndarray) -> np.ndarray:
    """Precision on RECALL_GRID, interpolated as the best precision at that recall or more (the usual
    way to average precision-recall curves: each is made monotone first)."""
    from sklearn.metrics import precision_recall_curve

    precision, recall, _ = precision_recall_curve(gold, probability)
    return np.array([precision[recall >= r].max() if (recall >= r).any() else 0.0 for r in RECALL_GRID])


def f1_curve(gold: np.ndarray, probability: np.ndarray) -> np.ndarray:
    """F1 at each threshold of THRESHOLD_GRID (probability >= threshold predicts positive)."""
    from sklearn.metrics import f1_score

    return np.array([f1_score(gold, probability >= t, zero_division=0) for t in THRESHOLD_GRID])


def threshold_curves_figure(
    seeds: dict[str, Seeds], thresholds: dict[str, float], *, split: str, title: str
) -> Figure:
    """Left: precision-recall curves; right: F1 against the threshold, 0.5 and each configuration's mean
    dev-tuned threshold marked."""
    figure = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI, layout="constrained")
    pr_axes, f1_axes = figure.subplots(1, 2)
    for index, (label, runs) in enumerate(seeds.items()):
        color = _COLORS[index % len(_COLORS)]
        precisions = [interpolated_precision(g, p) for g, p in runs]
        f1s = [f1_curve(g, p) for g, p in runs]
        for precision, f1 in zip(precisions, f1s, strict=True):
            pr_axes.plot(RECALL_GRID, precision, color=color, alpha=0.25, linewidth=0.8)
            f1_axes.plot(THRESHOLD_GRID, f1, color=color, alpha=0.25, linewidth=0.8)
        seeds_text = f"{len(runs)} seed" + ("s" if len(runs) != 1 else "")
        pr_axes.plot(RECALL_GRID, np.mean(precisions, axis=0), color=color, linewidth=2.2, label=f"{label}")
        f1_axes.plot(
            THRESHOLD_GRID, np.mean(f1s, axis=0), color=color, linewidth=2.2, label=f"{label} ({seeds_text})"
        )
        if label in thresholds and np.isfinite(thresholds[label]):
            f1_axes.axvline(thresholds[label], color=color, linestyle=":", linewidth=1.2)
    f1_axes.axvline(0.5, color="0.4", linestyle="--", linewidth=1.0, label="0.5")
    pr_axes.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1.02))
    pr_axes.set_title(f"precision-recall ({split})", loc="left", fontsize=10)
    f1_axes.set(xlabel="threshold on P(positive)", ylabel="F1", xlim=(0, 1), ylim=(0, 1.02))
    f1_axes.set_title(f"F1 vs threshold ({split}); dotted: mean tuned", loc="left", fontsize=10)
    for axes in (pr_axes, f1_axes):
        axes.grid(alpha=0.3)
    f1_axes.legend(fontsize=8, loc="lower center", frameon=False)
    figure.suptitle(title, x=0.01, ha="left", fontsize=11)
    return figure


def confusion_figure(matrices: dict[str, tuple[np.ndarray, str]], labels: list[str], *, title: str) -> Figure:
    """One confusion matrix per configuration (counts summed over seeds; rows gold, columns predicted),
    each titled with the threshold it was read at."""
    from sklearn.metrics import ConfusionMatrixDisplay

    figure = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI, layout="constrained")
    panels = np.atleast_1d(figure.subplots(1, len(matrices)))
    for axes, (label, (matrix, at)) in zip(panels, matrices.items(), strict=True):
        ConfusionMatrixDisplay(matrix, display_labels=labels).plot(
            ax=axes, colorbar=False, values_format="d", cmap="Blues"
        )
        axes.set_title(f"{label}\n{at}", fontsize=10)
    figure.suptitle(title, x=0.01, ha="left", fontsize=11)
    return figure


def reliability_figure(seeds: dict[str, Seeds], ece: dict[str, float], *, split: str, title: str) -> Figure:
    """Observed frequency of the positive class against the mean predicted probability per bin (the bins of
    dicelab.tasks.metrics.reliability_bins), each seed faint, all seeds pooled bold; the legend gives each
    configuration's mean expected calibration error over its trials."""
    from dicelab.tasks.metrics import CALIBRATION_BINS, reliability_bins

    figure = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=1.0, label="perfectly calibrated")
    for index, (label, runs) in enumerate(seeds.items()):
        color = _COLORS[index % len(_COLORS)]
        for gold, probability in runs:
            observed, predicted, _ = reliability_bins(gold, probability)
            axes.plot(predicted, observed, color=color, alpha=0.25, linewidth=0.8, marker=".", markersize=3)
        pooled_gold = np.concatenate([g for g, _ in runs])
        pooled = np.concatenate([p for _, p in runs])
        observed, predicted, _ = reliability_bins(pooled_gold, pooled)
        shown = f"{label}: ECE {ece[label]:.3f}" if np.isfinite(ece.get(label, np.nan)) else label
        axes.plot(predicted, observed, color=color, linewidth=2.2, marker="o", markersize=4, label=shown)
    axes.set(
        xlabel="mean predicted P(positive) in the bin", ylabel="fraction positive", xlim=(0, 1), ylim=(0, 1)
    )
    axes.set_title(
        f"reliability ({split}; {CALIBRATION_BINS} equal-width bins; ECE: mean over trials)",
        loc="left",
        fontsize=10,
    )
    axes.grid(alpha=0.3)
    axes.legend(fontsize=9, loc="upper left", frameon=False)
    figure.suptitle(title, x=0.01, ha="left", fontsize=11)
    return figure
