"""The report's figures. Plain matplotlib `Figure` objects rendered by Agg: no pyplot state, no display."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.image import imsave
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from dicelab.analysis.design import format_value, short_name
from dicelab.analysis.observations import LOSS, LOSS_ORDER, VARIANT, VARIANT_ORDER, paper_order
from dicelab.words import count

WIDTH, HEIGHT, DPI = 9.0, 5.0, 100  # every fixed-size figure is 900 x 500 pixels
# A fixed layout's margins, in inches (see _fixed_layout): the y tick and axis labels (three lines of 9 pt
# on the paired-difference panel), the x tick and axis labels, the gap between stacked panels, and padding.
_LEFT, _BOTTOM, _GAP, _PAD = 0.95, 0.55, 0.22, 0.1
MAX_X_TICKS = 8  # a sensitivity figure labels each swept value up to this many, else this many spread evenly
MAX_NAMED_BASELINES = 2  # the paired-difference panel names its baselines up to this many
MAX_AXIS_LABELS = 10  # a parallel-coordinates axis labels each value up to this many, else min and max
PAPER_LABEL = "paper (Li et al., 2020)"
_COLORS = [f"C{i}" for i in range(10)]
_PREFERRED_ORDERS = {LOSS: LOSS_ORDER, VARIANT: VARIANT_ORDER}


def save_figure(figure: Figure, path: Path) -> Path:
    """Write `figure` as a PNG at DPI, in one draw.

    `savefig` draws a figure with a layout engine twice: once without output to place the axes, then for
    real. Agg's own draw places them and renders in one pass; its pixels are written as they are."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.set_dpi(DPI)
    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
    canvas.draw()
    imsave(path, np.asarray(canvas.buffer_rgba()), format="png", dpi=DPI)
    return path


def _fixed_layout(figure: Figure, panels: Sequence[Axes], legend: Legend, title_lines: int) -> None:
    """Stack `panels` (by their height ratios) between fixed margins, the legend at the upper right.

    Constrained layout measures every tick label of every axes twice before drawing: 40 % of drawing a
    sensitivity or training-curve figure. Their margins hold text of known size (tick labels, axis labels,
    a title of `title_lines` lines at 11 pt), so they are fixed; only the legend's width varies with its
    labels, and only the legend is measured."""
    canvas = FigureCanvasAgg(figure)
    legend_width = legend.get_window_extent(canvas.get_renderer()).width / figure.dpi
    top = _PAD + 0.2 * title_lines
    right = WIDTH - legend_width - 2 * _PAD
    ratios = panels[0].get_subplotspec().get_gridspec().get_height_ratios()
    ratios = ratios or [1.0] * len(panels)
    room = HEIGHT - top - _BOTTOM - _GAP * (len(panels) - 1)
    y = HEIGHT - top
    for panel, ratio in zip(panels, ratios, strict=True):
        height = room * ratio / sum(ratios)
        y -= height
        panel.set_position((_LEFT / WIDTH, y / HEIGHT, (right - _LEFT) / WIDTH, height / HEIGHT))
        y -= _GAP


def sensitivity_figure(
    curves: pd.DataFrame,
    points: pd.DataFrame,
    *,
    param: str,
    relation: str,
    y_label: str,
    title: str,
    bounds: tuple[float, float] | None = None,
) -> Figure:
    """Mean over seeds per value (line), interval band, each seed (dots), optimum (star) and the paper (X).

    `curves` holds one figure's rows of `sensitivity_curves`; `points` its usable trials (`line`, x, value).
    The optimum of each line is named in the legend, where labels cannot collide. A band that leaves
    `bounds` (the metric's range) is cut there, with a caret marking the cut; the tables keep the interval.
    The star's and the carets' collections carry gid "optimum" and "band-cut".
    """
    figure = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI)
    with_delta = "delta" in curves and bool(np.isfinite(curves["delta"].to_numpy(dtype=float)).any())
    if with_delta:
        axes, lower = figure.subplots(2, 1, sharex=True, height_ratios=[3, 1.4])
    else:
        axes, lower = figure.add_subplot(), None
    numeric = pd.api.types.is_numeric_dtype(curves["x"])
    categories = [] if numeric else sorted(curves["x"].astype(str).unique())
    values = curves["x"].to_numpy(dtype=float) if numeric else np.arange(len(categories), dtype=float)
    logarithmic = numeric and values.min() > 0 and values.max() / values.min() >= 100

    def position(x: pd.Series) -> np.ndarray:
        if numeric:
            return x.to_numpy(dtype=float)
        return np.array([categories.index(str(value)) for value in x], dtype=float)

    def spread(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        # Offsets are fractions of the smallest gap between values, in the axis' own scale.
        return x * np.power(10.0, offsets * gap) if logarithmic else x + offsets * gap

    distinct = np.unique(np.log10(values) if logarithmic else values)
    gap = float(np.diff(distinct).min()) if distinct.size > 1 else 1.0
    handles: list[Line2D] = []
    cut = False
    for index, (line, rows) in enumerate(curves.groupby("line", sort=False)):
        color = _COLORS[index % len(_COLORS)]
        rows = rows.sort_values("x")
        x = position(rows["x"])
        best = rows[rows["is_optimum"]]
        label = line
        if len(best):
            label += f"  (best {format_value(best['x'].iloc[0])}: {float(best['mean'].iloc[0]):.2f})"
            axes.scatter(
                position(best["x"]),
                best["mean"],
                marker="*",
                s=260,
                color=color,
                edgecolors="black",
                zorder=4,
                gid="optimum",
            )
        elif rows["mean"].notna().any():
            label += "  (no single best)"
        (handle,) = axes.plot(x, rows["mean"], marker="o", color=color, linewidth=2, label=label, zorder=3)
        handles.append(handle)
        low, high = rows["ci_low"].to_numpy(dtype=float), rows["ci_high"].to_numpy(dtype=float)
        band = np.isfinite(low)
        if bounds is not None:
            cut_low, cut_high = band & (low < bounds[0]), band & (high > bounds[1])
            low, high = np.clip(low, *bounds), np.clip(high, *bounds)
            for where, bound, marker in ((cut_low, bounds[0], "v"), (cut_high, bounds[1], "^")):
                if where.any():
                    cut = True
                    axes.scatter(
                        x[where], np.full(where.sum(), bound), marker=marker, s=40, color=color, zorder=4,
                        gid="band-cut",
                    )  # fmt: skip
        axes.fill_between(x, low, high, where=band, color=color, alpha=0.18, linewidth=0)
        seeds = points[points["line"] == line]
        if len(seeds):
            crowd = int(seeds.groupby("x").size().max())  # many seeds: smaller, fainter dots
            axes.scatter(
                spread(position(seeds["x"]), _jitter(seeds)),
                seeds["value"],
                s=16 if crowd <= 10 else 7,
                color=color,
                alpha=0.55 if crowd <= 10 else 0.25,
                edgecolors="none",
                zorder=2,
            )
    paper = curves.dropna(subset=["paper"]).drop_duplicates(subset=["x"])
    extras = [
        Line2D([], [], marker="o", linestyle="", color="0.4", alpha=0.55, markersize=4, label="one seed"),
        Line2D(
            [],
            [],
            marker="*",
            linestyle="",
            color="0.6",
            markeredgecolor="black",
            markersize=13,
            label="optimum (best mean)",
        ),
    ]
    if cut:
        extras.append(
            Line2D(
                [],
                [],
                marker="^",
                linestyle="",
                color="0.4",
                markersize=6,
                label="band cut at the metric's range",
            )
        )
    if len(paper):
        axes.scatter(position(paper["x"]), paper["paper"], marker="X", s=70, color="black", zorder=5)
        extras.append(
            Line2D([], [], marker="X", linestyle="", color="black", markersize=8, label=PAPER_LABEL)
        )
    if logarithmic:
        axes.set_xscale("log")
    ticks = sorted(set(values))
    if numeric and len(ticks) > MAX_X_TICKS:  # more labels than fit side by side: evenly spaced ones
        ticks = [ticks[i] for i in np.unique(np.linspace(0, len(ticks) - 1, MAX_X_TICKS).round().astype(int))]
    if numeric:
        ticks = _apart(ticks, logarithmic)
    axes.set_xticks(ticks, [format_value(v) for v in ticks] if numeric else categories)
    axes.minorticks_off()
    axes.set_ylabel(y_label)
    axes.set_title(title, loc="left", fontsize=11)
    axes.grid(alpha=0.3)
    if lower is not None:
        _paired_differences(lower, curves, position)
    (lower or axes).set_xlabel(param + (f"   ({relation})" if relation else ""))
    legend = figure.legend(handles=[*handles, *extras], loc="upper right", fontsize=9, frameon=False)
    _fixed_layout(figure, [axes] if lower is None else [axes, lower], legend, title.count("\n") + 1)
    return figure


def _paired_differences(
    axes: Axes, curves: pd.DataFrame, position: Callable[[pd.Series], np.ndarray]
) -> None:
    """The lower panel: each point's paired difference to its baseline with the interval (gid "paired")."""
    axes.axhline(0.0, color="0.3", linewidth=0.8)
    for index, (_line, rows) in enumerate(curves.groupby("line", sort=False)):
        rows = rows[np.isfinite(rows["delta"].to_numpy(dtype=float))].sort_values("x")
        if rows.empty:
            continue
        delta = rows["delta"].to_numpy(dtype=float)
        low, high = rows["delta_low"].to_numpy(dtype=float), rows["delta_high"].to_numpy(dtype=float)
        errors = np.nan_to_num(np.vstack([delta - low, high - delta]), nan=0.0)
        container = axes.errorbar(
            position(rows["x"]), delta, yerr=errors, color=_COLORS[index % len(_COLORS)], marker="o",
            markersize=4, capsize=3, linewidth=1,
        )  # fmt: skip
        container.lines[0].set_gid("paired")
    baselines = sorted({str(b) for b in curves["baseline"] if b})
    # a baseline per swept value (ce at each alpha) would list them all: name what they have in common
    named = ", ".join(baselines) if len(baselines) <= MAX_NAMED_BASELINES else "the baseline\nat each point"
    axes.set_ylabel(f"Δ vs {named}\n(paired)", fontsize=9)
    axes.grid(alpha=0.3)


def training_curves_figure(curves: pd.DataFrame, *, y_label: str, title: str) -> Figure:
    """Dev metric against optimizer step, one line per configuration (mean over seeds at each step).

    `curves` has columns config, step, mean, n.
    """
    figure = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI)
    axes = figure.add_subplot()
    for index, (config, rows) in enumerate(curves.groupby("config", sort=False)):
        seeds = int(rows["n"].max())
        label = f"{config} ({count(seeds, 'seed')})"
        axes.plot(rows["step"], rows["mean"], marker=".", color=_COLORS[index % len(_COLORS)], label=label)
    axes.set_xlabel("optimizer step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at step 1.25
    axes.set_ylabel(y_label)
    axes.set_title(title, loc="left", fontsize=11)
    axes.grid(alpha=0.3)
    legend = figure.legend(loc="upper right", fontsize=9, frameon=False)
    _fixed_layout(figure, [axes], legend, title.count("\n") + 1)
    return figure


def parallel_coordinates_figure(
    trials: pd.DataFrame, axes_names: Sequence[str], *, value_label: str, title: str
) -> Figure:
    """One polyline per trial across the varied params, coloured by the metric (last axis).

    The best trials are drawn last, on top."""
    trials = trials.sort_values("value")
    figure = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    columns = [*axes_names, "value"]
    scaled = np.column_stack([_unit_scale(trials[column]) for column in columns])
    values = trials["value"].to_numpy(dtype=float)
    norm = Normalize(np.nanmin(values), np.nanmax(values))
    xs = np.arange(len(columns), dtype=float)
    segments = [np.column_stack([xs, row]) for row in scaled]
    lines = LineCollection(segments, array=values, cmap="viridis", norm=norm, linewidths=1.2, alpha=0.75)
    axes.add_collection(lines)
    for x, column in zip(xs, columns, strict=True):
        axes.axvline(x, color="0.3", linewidth=0.8)
        # The metric axis is continuous (and has the colorbar): label its ends only.
        for y, text in _axis_ticks(trials[column], max_labels=2 if column == "value" else MAX_AXIS_LABELS):
            axes.text(
                x + 0.03,
                y,
                text,
                fontsize=8,
                va="center",
                ha="left",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 0.5},
            )
    axes.set_xlim(-0.1, len(columns) - 0.6)
    axes.set_ylim(-0.18, 1.06)
    axes.set_xticks(xs, [short_name(c) for c in axes_names] + [value_label], fontsize=9)
    axes.set_yticks([])
    for side in ("left", "right", "top"):
        axes.spines[side].set_visible(False)
    axes.set_title(title, loc="left", fontsize=11)
    figure.colorbar(lines, ax=axes, label=value_label, pad=0.02)
    return figure


def importance_figure(table: pd.DataFrame, *, title: str) -> Figure:
    """Horizontal bars per param, PED-ANOVA and fANOVA side by side, one panel per scope."""
    scopes = list(dict.fromkeys(table["scope"]))
    sizes = [table.loc[table["scope"] == scope, "param"].nunique() for scope in scopes]
    height = 1.0 + sum(0.9 + 0.45 * size for size in sizes)
    figure = Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")
    panels = figure.subplots(len(scopes), 1, squeeze=False, height_ratios=[0.9 + 0.45 * s for s in sizes])
    evaluators = list(dict.fromkeys(table["evaluator"]))
    for panel, scope in zip(panels[:, 0], scopes, strict=True):
        rows = table[table["scope"] == scope]
        params = list(
            rows.groupby("param")["importance"].mean().sort_values(ascending=True).index
        )  # largest on top
        y = np.arange(len(params), dtype=float)
        height_bar = 0.8 / len(evaluators)
        for index, evaluator in enumerate(evaluators):
            scores = rows[rows["evaluator"] == evaluator].set_index("param")["importance"].reindex(params)
            panel.barh(
                y + (index - (len(evaluators) - 1) / 2) * height_bar,
                scores,
                height=height_bar,
                color=_COLORS[index],
                label=evaluator,
            )
        panel.set_yticks(y, params, fontsize=9)
        panel.set_xlim(0, 1)
        panel.set_title(f"{scope} ({int(rows['trials'].iloc[0])} trials)", loc="left", fontsize=10)
        panel.grid(axis="x", alpha=0.3)
    panels[-1, 0].set_xlabel("importance (normalized: each evaluator's scores sum to 1)")
    figure.suptitle(title, x=0.01, ha="left", fontsize=11)
    figure.legend(
        *panels[0, 0].get_legend_handles_labels(), loc="outside right upper", fontsize=9, frameon=False
    )
    return figure


def _jitter(points: pd.DataFrame) -> np.ndarray:
    """Offsets (fractions of the gap between x values) that spread the seeds of one value sideways, by rank
    so the figure is deterministic; at most a third of the gap, so seeds never drift to a neighbour."""
    rank = points.groupby("x").cumcount().to_numpy(dtype=float)
    seeds = points.groupby("x")["x"].transform("size").to_numpy(dtype=float)
    width = np.minimum(0.33, 0.04 * (seeds - 1))
    return (rank / np.maximum(seeds - 1, 1) - 0.5) * width


def _unit_scale(values: pd.Series) -> np.ndarray:
    """Numbers to [0, 1] by min-max, categories to evenly spaced positions, missing values to -0.1."""
    if pd.api.types.is_numeric_dtype(values):
        array = values.to_numpy(dtype=float)
        low, high = np.nanmin(array), np.nanmax(array)
        scaled = (array - low) / (high - low) if high > low else np.full_like(array, 0.5)
    else:
        lookup = _category_positions(values)
        scaled = np.array(
            [lookup.get(str(v), np.nan) if pd.notna(v) else np.nan for v in values], dtype=float
        )
    return np.where(np.isnan(scaled), -0.1, scaled)


def _category_positions(values: pd.Series) -> dict[str, float]:
    """Evenly spaced, first on top; losses and variants in the paper's order, other text alphabetically."""
    preferred = _PREFERRED_ORDERS.get(str(values.name), ())
    categories = sorted(values.dropna().astype(str).unique(), key=lambda name: paper_order(name, preferred))
    if len(categories) == 1:
        return {categories[0]: 0.5}
    return {name: 1 - index / (len(categories) - 1) for index, name in enumerate(categories)}


def _apart(ticks: list[float], logarithmic: bool) -> list[float]:
    """The swept values whose labels do not overlap: sampled values (random or Optuna search) can lie closer
    than a label's width, and their labels then print over each other. From the left, a value is labelled
    when it is at least a tenth of the axis from the last labelled one; the largest is always labelled (in
    place of the one before it when those two are too close)."""
    where = np.log10(ticks) if logarithmic else np.asarray(ticks, dtype=float)
    gap = (where[-1] - where[0]) / 10 if len(ticks) > 1 else 0.0
    kept = [0]
    for index in range(1, len(ticks)):
        if where[index] - where[kept[-1]] >= gap:
            kept.append(index)
    last = len(ticks) - 1
    if kept[-1] != last:
        if len(kept) > 1:
            kept.pop()
        kept.append(last)
    return [ticks[index] for index in kept]


def _axis_ticks(values: pd.Series, max_labels: int) -> list[tuple[float, str]]:
    ticks: list[tuple[float, str]] = []
    if pd.api.types.is_numeric_dtype(values):
        distinct = np.unique(values.dropna().to_numpy(dtype=float))
        if distinct.size == 1:
            ticks = [(0.5, f"{distinct[0]:.4g}")]
        elif distinct.size:
            low, high = distinct[0], distinct[-1]
            shown = distinct if distinct.size <= max_labels else distinct[[0, -1]]
            ticks = [((value - low) / (high - low), f"{value:.4g}") for value in shown]
    else:
        ticks = [(y, name) for name, y in _category_positions(values).items()]
    if values.isna().any():
        ticks.append((-0.1, "n/a"))
    return ticks
