"""The report's sections besides the Decision (decision.py): each a function from the context to blocks."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime

import pandas as pd

from dicelab import __version__
from dicelab.analysis import plots
from dicelab.analysis._format import interval, number, signed
from dicelab.analysis.context import ReportContext
from dicelab.analysis.design import format_value, short_name, swept_params
from dicelab.analysis.document import Block, Bullets, Heading, Image, Table, Text
from dicelab.analysis.held_out import tuned_rival_deltas
from dicelab.analysis.importance import FANOVA_DEPTH, FANOVA_TREES
from dicelab.analysis.observations import (
    DEGENERATE,
    LOSS,
    LOSS_ORDER,
    SEED,
    TASK,
    VARIANT,
    VARIANT_ORDER,
    metric_label,
    metric_range,
    paper_order,
    value_label,
)
from dicelab.analysis.runs import load_histories
from dicelab.analysis.sensitivity import CurveLine
from dicelab.tracking import conventions as names
from dicelab.words import count

MAX_LISTED_TRIALS = 100  # excluded trials listed in the report; trials.csv has them all
MAX_CURVE_CONFIGS = 10  # training-curve lines per figure (the best by mean)
MAX_PARALLEL_AXES = 8
MAX_PARALLEL_LINES = 2000  # more lines only blacken the plot; a fixed-seed sample shows the same picture
OUTCOME_ORDER = (names.COMPLETED, names.EARLY_STOPPED, names.FAILED, names.NON_FINITE)


def header(ctx: ReportContext) -> list[Block]:
    runs, obs = ctx.runs, ctx.obs
    metrics = sorted(obs["metric"].unique())
    measured = ", ".join(f"`{ctx.options.column(m)}`" for m in metrics) or "nothing (no trials)"
    how = (
        "the best dev value over the trial's evaluations (the paper's model selection on dev)"
        if ctx.options.use == "best"
        else "the dev value at the trial's last evaluation"
    )
    counted = " and ".join(ctx.options.counted_outcomes)
    blocks: list[Block] = [
        Text(
            f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by dicelab {__version__} "
            f"from `{runs.tracking_uri}`."
        ),
        Text(
            f"Each trial contributes {measured}: {how}. Trials that ended {counted} count; the others "
            f"are listed at the end and never averaged in. Intervals of a mean are two-sided "
            f"{ctx.level} Student-t intervals over seeds."
        ),
    ]
    return blocks


def read_first(notes: list[str]) -> list[Block]:
    """The caveats, right after the Decision they qualify."""
    return [Heading("Read this first"), Bullets(notes)] if notes else []


def trials(ctx: ReportContext) -> list[Block]:
    runs, obs = ctx.runs, ctx.obs
    blocks: list[Block] = [Heading("Trials")]
    outcomes = [o for o in OUTCOME_ORDER if (obs["outcome"] == o).any()]
    outcomes += sorted(set(obs["outcome"]) - set(outcomes))
    rows = []
    for experiment in runs.experiments:
        own = obs[obs["experiment"] == experiment]
        counts = own["outcome"].value_counts()
        rows.append(
            [experiment, str(len(own)), *(str(counts.get(o, 0)) for o in outcomes), str(own["usable"].sum())]
        )
    blocks.append(Table(["experiment", "trials", *outcomes, "usable"], rows))
    if len(runs.parents):
        per_sweep = obs.groupby(["experiment", "sweep_id"]).size()
        blocks.append(
            Table(
                ["experiment", "sweep id", "parent run", "started (UTC)", "trials"],
                [
                    [
                        parent.experiment,
                        f"`{parent.sweep_id}`",
                        f"`{parent.run_id}`",
                        f"{parent.start_time:%Y-%m-%d %H:%M}" if pd.notna(parent.start_time) else "",
                        str(per_sweep.get((parent.experiment, parent.sweep_id), 0)),
                    ]
                    for parent in runs.parents.itertuples()
                ],
                caption="sweep invocations (one parent run each)",
            )
        )
    return blocks


def ablation(ctx: ReportContext) -> list[Block]:
    if ctx.ablation.empty:
        return []
    with_paper = bool(ctx.ablation["paper"].notna().any())
    blocks: list[Block] = [
        Heading("Ablation: loss × data variant"),
        Text(
            f"Layout of the paper's Table 8. Each cell: mean ± {ctx.level} CI half-width over seeds, "
            "in parentheses the difference to CE on the same data variant."
            + (
                " Rows marked (paper) are the numbers from the sweep config's `paper.results`"
                + (
                    " and, below them, the paper table's other printed rows (`paper.baselines`)."
                    if any(paper.baselines for paper in ctx.runs.papers.values())
                    else "."
                )
                if with_paper
                else ""
            )
        ),
    ]
    for (experiment, task, metric), table in ctx.ablation.groupby(
        ["experiment", "task", "metric"], sort=False
    ):
        blocks += _ablation_group(ctx, table, ctx.group_title(experiment, task, metric))
    return blocks


def _ablation_group(ctx: ReportContext, table: pd.DataFrame, title: str) -> list[Block]:
    unit, metric = table["unit"].iloc[0], table["metric"].iloc[0]
    variants = sorted(set(table["variant"]), key=lambda name: paper_order(name, VARIANT_ORDER))
    usual = Counter(table.loc[table["n"] > 0, "n"]).most_common(1)
    usual_n = usual[0][0] if usual else 0
    cells = table.set_index(["loss", "variant"])
    on_test = bool((table["paper_split"] == "test").any())
    rows = []
    for loss in dict.fromkeys(table["loss"]):
        rows.append([f"`{loss}`", *(_cell(cells, loss, v, usual_n) for v in variants)])
        if table.loc[table["loss"] == loss, "paper"].notna().any():
            if on_test:  # dicelab's number on the split the paper reports, beside the paper's
                rows.append([f"`{loss}` (test)", *(_test_cell(cells, loss, v) for v in variants)])
            rows.append([f"`{loss}` (paper)", *(_paper_cell(cells, loss, v) for v in variants)])
    paper = ctx.runs.papers.get(str(table["experiment"].iloc[0]))
    if paper is not None and paper.baselines and paper.applies_to(str(metric)):
        column = variants.index("original") if "original" in variants else 0
        for name, number in paper.baselines.items():  # the table's other printed rows
            rows.append(
                [f"{name} (paper)", *("" if i != column else f"{number:.2f}" for i in range(len(variants)))]
            )
    n_text = f"n = {usual_n} seeds per cell unless marked" if usual_n else "no usable trials"
    blocks: list[Block] = [
        Heading(title, 3),
        Table(["loss", *variants], rows, caption=f"{value_label(metric, unit, ctx.options)}; {n_text}"),
    ]
    notes = [note for note in dict.fromkeys(table["paper_note"]) if note]
    if notes and table["paper"].notna().any():
        blocks.append(Text(" ".join(notes)))
    deltas = table[table["loss"] != "ce"].dropna(subset=["delta"])
    if len(deltas):
        with_paper = bool(deltas["paper_delta"].notna().any())
        header = [
            "loss",
            "variant",
            "Δ vs CE",
            f"{ctx.level} CI (Welch)",
            "paired Δ",
            f"{ctx.level} CI (paired)",
        ]
        header += ["p (Holm)", "verdict", "n", *(["paper Δ"] if with_paper else [])]
        blocks.append(
            Table(
                header,
                [
                    [
                        f"`{r.loss}`",
                        r.variant,
                        f"{r.delta:+.2f}",
                        interval(r.delta_ci_low, r.delta_ci_high, signed=True),
                        signed(r.paired_delta),
                        interval(r.paired_low, r.paired_high, signed=True),
                        f"{r.p_holm:.3g}" if math.isfinite(r.p_holm) else "—",
                        r.verdict,
                        f"{int(r.n_pairs)} pairs" if r.paired else f"unpaired, {r.n} vs CE",
                        *([signed(r.paper_delta, missing="")] if with_paper else []),
                    ]
                    for r in deltas.itertuples()
                ],
                caption="Welch: the cell means, unpaired; paired: on the seeds both ran, "
                "p from the paired test, Holm-corrected over this table",
            )
        )
    chosen = table[table["configs"] > 1]
    if len(chosen):
        blocks += [
            Text(
                "Losses whose hyperparameters were swept show their best configuration per variant, "
                "chosen on these same dev numbers (optimistic, as in the paper):"
            ),
            Table(
                ["loss", "variant", "configuration", "of"],
                [[f"`{r.loss}`", r.variant, f"`{r.config}`", str(r.configs)] for r in chosen.itertuples()],
            ),
        ]
    return blocks


def sensitivity(ctx: ReportContext) -> list[Block]:
    if ctx.curves.empty:
        return []
    with_paper = bool(ctx.curves["paper"].notna().any())
    blocks: list[Block] = [
        Heading("Sensitivity to hyperparameters"),
        Text(
            f"Lines: mean over seeds; band: {ctx.level} t-interval (cut at the metric's range, the tables "
            "keep the whole interval); dots: single seeds; star: the best mean; lower panel (when there is a "
            "baseline): each point's paired difference to it, with its interval"
            + ("; X: the paper's number (`paper.sensitivity`)." if with_paper else ".")
        ),
    ]
    figures: dict[tuple[str, str, str, str], list[CurveLine]] = {}
    for line in ctx.lines:
        figures.setdefault(line.figure, []).append(line)
    for (task, metric, loss, param), lines in figures.items():
        rows = ctx.curves[
            (ctx.curves["task"] == task)
            & (ctx.curves["metric"] == metric)
            & (ctx.curves["loss"] == loss)
            & (ctx.curves["param"] == param)
        ]
        if not rows.empty:
            blocks += _sensitivity_figure(ctx, rows, lines)
    return blocks


def _sensitivity_figure(ctx: ReportContext, rows: pd.DataFrame, lines: list[CurveLine]) -> list[Block]:
    first = rows.iloc[0]
    task, metric, loss, param, unit = (
        first["task"],
        first["metric"],
        first["loss"],
        first["param"],
        first["unit"],
    )
    relation = lines[0].param.relation
    y_label = value_label(metric, unit, ctx.options)
    single = bool((rows["n"] <= 1).all())
    subtitle = "one seed per point: no interval" if single else f"band: {ctx.level} t-interval over seeds"
    title = f"{loss}: {y_label} vs {short_name(param)}\ntask {task} · {subtitle}"
    points = pd.concat(
        [
            line.trials.loc[line.trials["usable"], [line.param.name, "value"]]
            .rename(columns={line.param.name: "x"})
            .assign(line=line.label)
            for line in lines
        ]
    )
    figure = plots.sensitivity_figure(
        rows, points, param=param, relation=relation, y_label=y_label, title=title, bounds=metric_range(unit)
    )
    path = ctx.save(figure, "sensitivity", task, metric, loss, param)
    blocks: list[Block] = [
        Heading(f"{loss}: {short_name(param)} ({task})", 3),
        Image(path, title.splitlines()[0]),
    ]
    if relation:
        blocks.append(Text(f"`{relation}` in every trial of this sweep, so one axis shows both."))
    averaged = lines[0].averaged_over
    if averaged:
        blocks.append(
            Text(
                f"Pooled over `{averaged}` (more values than lines can show): each point's interval "
                "mixes that parameter's effect with the seeds' spread."
            )
        )
    blocks.append(
        Bullets([optimum_sentence(line_rows, param) for _, line_rows in rows.groupby("line", sort=False)])
    )
    tuned = tuned_rival_deltas(rows, lines, ctx.obs, ctx.decisions, ctx.runs, ctx.options)
    blocks.append(_curve_table(ctx, rows, param, tuned))
    return blocks


def _curve_table(
    ctx: ReportContext, rows: pd.DataFrame, param: str, tuned: pd.DataFrame | None = None
) -> Table:
    """`tuned`: each point against CE with its threshold tuned on dev (analysis.held_out), when it applies."""
    show_paper = rows["paper"].notna().any()
    show_failed = bool((rows["n_failed"] + rows["n_degenerate"] + rows["n_missing"] > 0).any())
    show_delta = bool(rows["delta"].notna().any())
    header = ["line", short_name(param), "n", "mean", f"{ctx.level} CI"]
    if show_delta:
        found = sorted({b for b in rows["baseline"] if b})
        baselines = (  # one per swept value (ce at each alpha): the column says which rule chose them
            ", ".join(f"`{b}`" for b in found)
            if len(found) <= plots.MAX_NAMED_BASELINES
            else f"`{ctx.options.baseline}` with the same settings"
        )
        header += [f"Δ vs {baselines}", f"{ctx.level} CI (paired)", "p (Holm)"]
    show_tuned = tuned is not None and bool(tuned["tuned_delta"].notna().any())
    if show_tuned:
        header += ["Δ vs CE, threshold tuned on dev", "p (Holm)"]
    header += ["failed / degenerate / missing"] if show_failed else []
    header += ["paper"] if show_paper else []
    table_rows = []
    for index, r in zip(rows.index, rows.itertuples(), strict=True):
        row = [r.line, format_value(r.x), str(r.n), number(r.mean), interval(r.ci_low, r.ci_high)]
        if show_delta:
            paired = "" if not math.isfinite(r.delta) or r.delta_paired else " (unpaired)"
            row += [
                f"{r.delta:+.2f}{paired}" if math.isfinite(r.delta) else "",
                interval(r.delta_low, r.delta_high, signed=True) if math.isfinite(r.delta) else "",
                f"{r.delta_p_holm:.3g}" if math.isfinite(r.delta_p_holm) else "",
            ]
        if show_tuned:
            t = tuned.loc[index]
            unpaired = "" if not math.isfinite(t["tuned_delta"]) or t["tuned_paired"] else " (unpaired)"
            row += [
                f"{t['tuned_delta']:+.2f}{unpaired}" if math.isfinite(t["tuned_delta"]) else "",
                f"{t['tuned_p_holm']:.3g}" if math.isfinite(t["tuned_p_holm"]) else "",
            ]
        row += [f"{r.n_failed} / {r.n_degenerate} / {r.n_missing}"] if show_failed else []
        row += [number(r.paper) if math.isfinite(r.paper) else ""] if show_paper else []
        if r.is_optimum:
            row[1] = f"**{row[1]}** (best)"
        table_rows.append(row)
    return Table(header, table_rows)


def optimum_sentence(rows: pd.DataFrame, param: str) -> str:
    """Where a line peaks and how clearly: "original: best `alpha` = 0.4 (81.00 ± 2.48, n=3); ..."."""
    line = rows["line"].iloc[0]
    best = rows[rows["is_optimum"]]
    if best.empty:
        if rows["mean"].notna().any():
            ties = rows[rows["mean"] == rows["mean"].max()]
            values = ", ".join(format_value(x) for x in ties["x"])
            tied_at = number(ties["mean"].iloc[0])
            return f"{line}: no single best `{short_name(param)}`: {values} tie at {tied_at}"
        return f"{line}: no usable trials"
    top = best.iloc[0]
    where = f"{line}: best `{short_name(param)}` = {format_value(top['x'])}"
    if top["n"] < 2:
        return f"{where} ({number(top['mean'])}, single seed: no interval)"
    others = rows[~rows["is_optimum"] & rows["ci_high"].notna()]
    overlapping = int(((others["ci_high"] >= top["ci_low"]) & (others["ci_low"] <= top["ci_high"])).sum())
    spread = f"{number(top['mean'])} ± {(top['ci_high'] - top['ci_low']) / 2:.2f}, n={top['n']}"
    if not len(others):
        return f"{where} ({spread})"
    return f"{where} ({spread}); {_overlap_phrase(overlapping, len(others))}"


def _overlap_phrase(overlapping: int, others: int) -> str:
    if others == 1:
        return (
            "its interval overlaps the other value's" if overlapping else "clearly ahead of the other value"
        )
    if overlapping == 0:
        return "clearly ahead: no other value's interval overlaps its own"
    if overlapping == others:
        every = "both" if others == 2 else f"all {others}"
        return f"its interval overlaps those of {every} other values"
    return f"its interval overlaps those of {overlapping} of the {others} other values"


def importance(ctx: ReportContext) -> list[Block]:
    table, notes = ctx.importance.table, ctx.importance.notes
    if table.empty and not notes:
        return []
    blocks: list[Block] = [
        Heading("Hyperparameter importance"),
        Text(
            "Optuna's PED-ANOVA (what separates the top trials from the rest) and fANOVA (share of the "
            "metric's variance a parameter explains, from a random forest of "
            f"{FANOVA_TREES} trees of depth at most {FANOVA_DEPTH}) on the usable trials. "
            f"`{SEED}` is included as a yardstick: a hyperparameter no more important than the seed is "
            "indistinguishable from seed noise in this sweep. Most important first."
        ),
    ]
    for (experiment, task, metric), rows in table.groupby(["experiment", "task", "metric"], sort=False):
        title = f"Importance for {metric_label(metric)} · task {task}" + (
            f" · {experiment}" if ctx.several else ""
        )
        path = ctx.save(plots.importance_figure(rows, title=title), "importance", experiment, task, metric)
        wide = rows.pivot_table(
            index=["scope", "param"], columns="evaluator", values="importance", sort=False
        )
        # Scopes in the order computed (all losses first), rows within a scope by mean importance.
        scopes = list(dict.fromkeys(rows["scope"]))
        ranked = wide.assign(_mean=wide.mean(axis=1)).reset_index()
        ranked["_scope"] = ranked["scope"].map(scopes.index)
        ranked = ranked.sort_values(["_scope", "_mean"], ascending=[True, False], kind="stable")
        blocks += [
            Heading(ctx.group_title(experiment, task, metric), 3),
            Image(path, title),
            Table(
                ["scope", "param", *wide.columns],
                [
                    [r["scope"], f"`{r['param']}`", *(f"{r[column]:.3f}" for column in wide.columns)]
                    for _, r in ranked.iterrows()
                ],
            ),
        ]
    if notes:
        blocks.append(Bullets(notes))
    return blocks


def parallel_coordinates(ctx: ReportContext) -> list[Block]:
    usable = ctx.obs[ctx.obs["usable"]]
    blocks: list[Block] = []
    for (experiment, task, metric), group in usable.groupby(["experiment", TASK, "metric"], sort=True):
        axes = [key for key in (LOSS, VARIANT) if group[key].nunique() > 1]
        axes += [p.name for p in swept_params(group, ctx.runs.param_columns)]
        axes = axes[:MAX_PARALLEL_AXES]
        if not axes:
            continue
        label = value_label(metric, group["unit"].iloc[0], ctx.options)
        shown = group.sample(MAX_PARALLEL_LINES, random_state=0) if len(group) > MAX_PARALLEL_LINES else group
        which = "Every usable trial" if len(shown) == len(group) else f"{len(shown)} of {len(group)} trials"
        title = f"{which} · task {task}" + (f" · {experiment}" if ctx.several else "")
        figure = plots.parallel_coordinates_figure(shown, axes, value_label=label, title=title)
        path = ctx.save(figure, "parallel", experiment, task, metric)
        blocks += [Heading(ctx.group_title(experiment, task, metric), 3), Image(path, title)]
    if not blocks:
        return []
    return [
        Heading("Parallel coordinates"),
        Text("One line per usable trial through the parameters it varied, coloured by its metric."),
        *blocks,
    ]


def training_curves(ctx: ReportContext) -> list[Block]:
    """One figure per loss, in the ablation table's order (losses, then variants, in the paper's order)."""
    groups = []
    usable = ctx.obs[ctx.obs["usable"]]
    for (experiment, task, metric, loss), group in sorted(
        usable.groupby(["experiment", TASK, "metric", LOSS], sort=True),
        key=lambda item: (*item[0][:3], paper_order(str(item[0][3]), LOSS_ORDER)),
    ):
        labelled = group.assign(config=ctx.config_labels(group))
        means = labelled.groupby("config")["value"].mean().sort_values(ascending=False)
        best = set(means.index[:MAX_CURVE_CONFIGS])
        shown = _table_order(labelled[labelled["config"].isin(best)], ctx)
        groups.append(
            ((experiment, task, metric, loss), labelled[labelled["config"].isin(best)], shown, len(means))
        )
    blocks: list[Block] = []
    for metric in sorted({key[2] for key, *_ in groups}):
        run_ids = [rid for key, rows, *_ in groups if key[2] == metric for rid in rows["run_id"]]
        history = load_histories(ctx.runs, run_ids, names.dev_metric(metric))
        for (experiment, task, _metric, loss), rows, shown, total in (g for g in groups if g[0][2] == metric):
            points = history.merge(rows[["run_id", "config", "scale"]], on="run_id")
            if points.empty:
                continue
            points["value"] = points["value"] * points["scale"]
            curves = (
                points.groupby(["config", "step"], sort=False)["value"]
                .agg(mean="mean", n="size")
                .reset_index()
            )
            curves["config"] = pd.Categorical(curves["config"], categories=shown, ordered=True)
            curves = curves.sort_values(["config", "step"])
            curves["config"] = curves["config"].astype(str)
            unit = rows["unit"].iloc[0]
            title = f"{loss}: dev {metric_label(metric)} during training · task {task}" + (
                f" · {experiment}" if ctx.several else ""
            )
            y_label = f"dev {metric_label(metric)}" + (f" ({unit})" if unit else "") + ", mean over seeds"
            figure = plots.training_curves_figure(curves, y_label=y_label, title=title)
            path = ctx.save(figure, "training", experiment, task, metric, loss)
            blocks += [Heading(f"{loss} ({task})", 3), Image(path, title)]
            if total > len(shown):
                blocks.append(
                    Text(f"The {len(shown)} best of {total} configurations by mean, for legibility.")
                )
    if not blocks:
        return []
    return [
        Heading("Training curves"),
        Text(f"`{names.dev_metric('<metric>')}` at each evaluation, mean over a configuration's seeds."),
        *blocks,
    ]


def _table_order(rows: pd.DataFrame, ctx: ReportContext) -> list[str]:
    """Configuration labels as the ablation table lists them: variants in the paper's order, then params."""
    params = [p.name for p in swept_params(rows, ctx.runs.param_columns)]
    ordered = rows.assign(_variant=[paper_order(v, VARIANT_ORDER) for v in rows[VARIANT]])
    ordered = ordered.sort_values(["_variant", *params], kind="stable")
    return list(dict.fromkeys(ordered["config"]))


def excluded_trials(ctx: ReportContext) -> list[Block]:
    excluded = ctx.obs[~ctx.obs["usable"]]
    if excluded.empty:
        return []
    listed = excluded.head(MAX_LISTED_TRIALS)
    rows = [
        [
            *([r["experiment"]] if ctx.several else []),
            f"`{r['trial_id']}`" if pd.notna(r["trial_id"]) else "",
            f"`{r['run_id']}`",
            str(r[LOSS]),
            str(r[VARIANT]),
            format_value(r[SEED]) if SEED in r and pd.notna(r[SEED]) else "",
            r["exclusion"],
            _why_excluded(r),
        ]
        for _, r in listed.iterrows()
    ]
    header = [
        *(["experiment"] if ctx.several else []),
        "trial",
        "run",
        "loss",
        "variant",
        "seed",
        "why",
        "reason",
    ]
    blocks: list[Block] = [Heading("Trials not counted"), Table(header, rows)]
    if len(excluded) > len(listed):
        blocks.append(
            Text(
                f"…and {count(len(excluded) - len(listed), 'more trial')}: "
                "see `trials.csv` (column `exclusion`)."
            )
        )
    return blocks


def _why_excluded(row: pd.Series) -> str:
    """The run's own reason: the engine's for a failure, the degenerate tag's for a degenerate trial."""
    for column in ("degenerate", "reason") if row["exclusion"] == DEGENERATE else ("reason",):
        if column in row and pd.notna(row[column]):
            return str(row[column])
    return ""


def files(ctx: ReportContext, tables: dict[str, pd.DataFrame]) -> list[Block]:
    """Write the CSVs and list what the folder holds."""
    for name, frame in tables.items():
        frame.to_csv(ctx.root / name, index=False)
    descriptions = {
        "trials.csv": "a row per trial: params, metrics, outcome, the value used, any exclusion",
        "comparisons.csv": "every comparison: difference, interval, p (raw and Holm), verdict, seeds needed",
        "sensitivity.csv": "the numbers behind the sensitivity figures",
        "ablation.csv": "the ablation tables: Δ intervals (Welch and paired), p (Holm), verdicts"
        + (", the paper's numbers" if ctx.ablation["paper"].notna().any() else ""),
        "importance.csv": "PED-ANOVA and fANOVA importances",
    }
    items = [f"`{name}`: {descriptions.get(name, '')}" for name in tables]
    if (ctx.root / "figures").is_dir():
        items.append("`figures/`: every figure as PNG")
    return [Heading("Files"), Bullets(items)]


def _cell(cells: pd.DataFrame, loss: str, variant: str, usual_n: int) -> str:
    if (loss, variant) not in cells.index:
        return "—"
    row = cells.loc[(loss, variant)]
    extras = []
    if row["n"] != usual_n or row["n"] == 1:
        extras.append(f"n={row['n']}" + (", no CI" if row["n"] == 1 else ""))
    if row["n_failed"]:
        extras.append(f"{row['n_failed']} failed")
    if row["n_degenerate"]:
        extras.append(f"{row['n_degenerate']} degenerate")
    if row["n_missing"]:
        extras.append(f"{row['n_missing']} missing")
    text = "—" if row["n"] == 0 else number(row["mean"])
    if math.isfinite(row["ci_high"]):
        text += f" ± {(row['ci_high'] - row['ci_low']) / 2:.2f}"
    if loss != "ce" and math.isfinite(row["delta"]):
        text += f" ({row['delta']:+.2f})"
    return text + (f" [{'; '.join(extras)}]" if extras else "")


def _test_cell(cells: pd.DataFrame, loss: str, variant: str) -> str:
    if (loss, variant) not in cells.index or not math.isfinite(cells.loc[(loss, variant), "paper_mean"]):
        return ""
    return number(cells.loc[(loss, variant), "paper_mean"])


def _paper_cell(cells: pd.DataFrame, loss: str, variant: str) -> str:
    if (loss, variant) not in cells.index or not math.isfinite(cells.loc[(loss, variant), "paper"]):
        return ""
    row = cells.loc[(loss, variant)]
    delta = f" ({row['paper_delta']:+.2f})" if loss != "ce" and math.isfinite(row["paper_delta"]) else ""
    return f"{row['paper']:.2f}{delta}"
