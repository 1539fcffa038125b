"""The report's "Read this first" list: what limits how far the numbers can be trusted."""

from __future__ import annotations

from scipy import stats

from dicelab.analysis.context import ReportContext
from dicelab.analysis.observations import DEGENERATE, LOSS, SEED, TASK, VARIANT, metric_label
from dicelab.tracking import conventions as names
from dicelab.words import count


def caveats(ctx: ReportContext) -> list[str]:
    obs, runs, options = ctx.obs, ctx.runs, ctx.options
    if len(obs) == 0:
        return ["There are no trials to analyze yet."]
    if not obs["usable"].any():
        return [f"None of the {len(obs)} trials has a usable value: see 'Trials not counted' below."]
    notes = [*_seed_counts(ctx), *_nothing_learned(ctx)]
    counted = obs["outcome"].isin(options.counted_outcomes)
    nan = int((counted & (obs["exclusion"] == "metric is NaN or inf")).sum())
    missing = int((counted & (obs["exclusion"] == "metric not logged")).sum())
    if nan or missing:
        notes.append(
            f"{count(nan + missing, 'finished trial')} without a finite value "
            f"({nan} NaN/inf, {missing} not logged): counted as missing, not averaged."
        )
    degenerate = int((obs["exclusion"] == DEGENERATE).sum())
    if degenerate:
        notes.append(
            f"{count(degenerate, 'trial')} degenerate (predicted a single class, no positive or no entity): "
            "left out of every mean and comparison, listed under 'Trials not counted' with the reason."
        )
    early = int((obs["outcome"] == names.EARLY_STOPPED).sum())
    if early:
        notes.append(
            f"{count(early, 'trial')} stopped early (scheduler or patience); "
            + (
                "their best value so far counts as an observation of their configuration."
                if options.include_early_stopped
                else "they are excluded (--exclude-early-stopped)."
            )
        )
    fell_back = int(obs["device_fallback"].notna().sum()) if "device_fallback" in obs else 0
    if fell_back:
        notes.append(
            f"{count(fell_back, 'trial')} given a GPU that CUDA could not see trained on CPU instead "
            f"(`{names.DEVICE_FALLBACK}`): their times and costs are not a GPU's."
        )
    running = int(obs["outcome"].isin(["running"]).sum())
    if running:
        notes.append(f"{count(running, 'trial')} still running, not counted yet.")
    for task, metrics in obs.groupby(TASK)["metric"].unique().items():
        if len(metrics) > 1:
            notes.append(
                f"Task `{task}` mixes metrics ({', '.join(sorted(metrics))}); each is analysed apart."
            )
    for experiment in runs.experiments:
        sweeps = runs.parents.loc[runs.parents["experiment"] == experiment, "sweep_id"].nunique()
        if sweeps > 1:
            notes.append(
                f"`{experiment}` holds {sweeps} sweep invocations and their trials are pooled; "
                "pass --sweep-id to analyze one."
            )
    repeated = _repeated_seeds(ctx)
    if repeated:
        notes.append(
            f"{count(repeated, 'configuration')} ran the same seed more than once (across sweep "
            "invocations); each run counts, which can make intervals look tighter than the seeds justify."
        )
    if runs.duplicates_dropped:
        notes.append(
            f"{count(runs.duplicates_dropped, 'older run')} of resumed trials superseded and left out."
        )
    if runs.ignored_runs:
        notes.append(
            f"{count(runs.ignored_runs, 'run')} without a `{names.ROLE}` tag of trial or parent ignored."
        )
    for experiment, paper in runs.papers.items():
        metrics = set(obs.loc[obs["experiment"] == experiment, "metric"])
        if paper and paper.metric and paper.metric not in metrics:
            notes.append(
                f"The paper's numbers for `{experiment}` are {paper.metric}; this analysis uses "
                f"{', '.join(sorted(metrics))}, so they are not shown."
            )
    notes.extend(runs.notes)
    return notes


def _seed_counts(ctx: ReportContext) -> list[str]:
    """One seed: no interval at all; two or three: intervals so wide they say little."""
    notes = []
    if not ctx.curves.empty:
        points = ctx.curves[ctx.curves["n"] > 0]
        single = int((points["n"] == 1).sum())
        if single == len(points) and single:
            notes.append(
                "Every configuration has a single usable seed: no confidence interval can be given, and "
                "differences between points may be seed noise. Sweep over `train.seed` to measure it."
            )
        elif single:
            notes.append(
                f"{single} of {len(points)} curve points have a single usable seed: no interval there."
            )
    elif not (ctx.ablation["n"] >= 2).any():
        notes.append("Every cell has a single usable seed: no confidence interval can be given.")
    fewest = min((n for n in (*ctx.curves["n"], *ctx.ablation["n"]) if n >= 2), default=0)
    if fewest in (2, 3):
        t = stats.t.ppf(0.5 + ctx.options.confidence / 2, fewest - 1)
        notes.append(
            f"With {fewest} seeds a {ctx.level} t-interval reaches ±{t:.1f} standard errors, so "
            "intervals are wide (and can leave the metric's range); more seeds narrow them quickly."
        )
    return notes


def _nothing_learned(ctx: ReportContext) -> list[str]:
    """A loss at 0 everywhere, or one value for every trial: there is nothing to compare."""
    usable, notes = ctx.obs[ctx.obs["usable"]], []
    zero = usable.groupby(["experiment", TASK, "metric", LOSS])["value"].agg(
        lambda v: len(v) > 1 and (v == 0).all()
    )
    for (experiment, task, metric, loss), _ in zero[zero].items():
        where = f"`{task}`" + (f" in `{experiment}`" if ctx.several else "")
        notes.append(
            f"`{loss}` scored 0 {metric_label(metric)} in every trial of {where}: nothing was learned "
            "to compare (an F1 of 0 means no positive was ever predicted right)."
        )
    for (experiment, task, metric), values in usable.groupby(["experiment", TASK, "metric"])["value"]:
        if len(values) > 1 and values.nunique() == 1:
            where = f"`{task}`" + (f" in `{experiment}`" if ctx.several else "")
            notes.append(
                f"Every usable trial of {where} has the same {metric_label(metric)}, "
                f"{values.iloc[0]:.2f}: there is nothing to compare (a model that predicts one class "
                "everywhere does this; train longer or on more data)."
            )
    return notes


def _repeated_seeds(ctx: ReportContext) -> int:
    if SEED not in ctx.obs:
        return 0
    keys = ["experiment", TASK, LOSS, VARIANT, *(c for c in ctx.runs.param_columns if c != SEED)]
    usable = ctx.obs[ctx.obs["usable"]]
    keys = [k for k in dict.fromkeys(keys) if k in usable]
    repeated = usable[usable.duplicated(subset=[*keys, SEED], keep=False)]
    return int(repeated.drop_duplicates(subset=keys).shape[0]) if len(repeated) else 0
