"""The report: tables, figures and notes in report.md / report.html, logged back to the sweep's parent run."""

from __future__ import annotations

import math
import re
import shutil
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from scipy import stats

from dicelab import __version__
from dicelab.analysis import _plots as plots
from dicelab.analysis._ablation import ablation_from_observations
from dicelab.analysis._design import config_label, format_value, short_name, swept_params
from dicelab.analysis._document import Bullets, Document, Heading, Image, Table, Text
from dicelab.analysis._importance import importance_from_observations
from dicelab.analysis._loading import RunSet, load_histories
from dicelab.analysis._observations import (
    LOSS,
    SEED,
    TASK,
    VARIANT,
    VARIANT_ORDER,
    AnalysisOptions,
    metric_label,
    observations,
    paper_order,
    value_label,
)
from dicelab.analysis._sensitivity import CurveLine, curve_lines, curves_from_lines
from dicelab.analysis._store import quiet_artifact_transfers
from dicelab.errors import DicelabError, TrackingError
from dicelab.tracking import conventions as names

MAX_LISTED_TRIALS = 100  # excluded trials listed in the report; trials.csv has them all
MAX_CURVE_CONFIGS = 10  # training-curve lines per figure (the best by mean)
MAX_PARALLEL_AXES = 8
MAX_PARALLEL_LINES = 2000  # more lines only blacken the plot; a fixed-seed sample shows the same picture
OUTCOME_ORDER = (names.COMPLETED, names.EARLY_STOPPED, names.FAILED, names.NON_FINITE)


@dataclass
class Report:
    directory: Path
    markdown: Path
    html: Path
    files: list[Path]  # everything written, report.md and report.html included
    logged_run_id: str | None  # the MLflow run whose `report/` artifacts hold a copy
    notes: list[str] = field(default_factory=list)  # the caveats the report lists


def default_report_dir(experiment: str) -> Path:
    return Path.cwd() / ".dicelab" / "reports" / _slug(experiment)


def build_report(
    runs: RunSet,
    out_dir: str | Path | None = None,
    options: AnalysisOptions | None = None,
    *,
    log_to_mlflow: bool = True,
) -> Report:
    """Write report.md, report.html, figures/*.png and the CSVs to `out_dir` (replacing an older report
    there, never anything else), then log the folder under `report/` of the sweep's newest parent run."""
    options = options or AnalysisOptions()
    out = Path(out_dir) if out_dir is not None else default_report_dir(runs.experiments[0])
    out = out.resolve()
    _check_replaceable(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        writer = _ReportWriter(runs, options, staging)
        document = writer.write()
        (staging / "report.md").write_text(document.to_markdown(staging), encoding="utf-8")
        (staging / "report.html").write_text(document.to_html(), encoding="utf-8")
        _replace_dir(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = sorted(path for path in out.rglob("*") if path.is_file())
    logged = _log_report(runs, out) if log_to_mlflow else None
    return Report(out, out / "report.md", out / "report.html", files, logged, writer.notes)


class _ReportWriter:
    def __init__(self, runs: RunSet, options: AnalysisOptions, root: Path):
        self.runs, self.options, self.root = runs, options, root
        self.obs = observations(runs, options)
        self.lines = list(curve_lines(self.obs, runs))
        self.curves = curves_from_lines(self.lines, runs, options)
        self.ablation = ablation_from_observations(self.obs, runs, options)
        self.importance = importance_from_observations(self.obs, runs)
        self.several = len(runs.experiments) > 1
        self.level = f"{options.confidence:.0%}"  # "95%"
        self.notes: list[str] = []
        self.document = Document(f"dicelab report: {' vs '.join(runs.experiments)}")

    def write(self) -> Document:
        self.notes = self._caveats()
        self._summary()
        self._ablation()
        self._sensitivity()
        self._importance()
        self._parallel_coordinates()
        self._training_curves()
        self._excluded_trials()
        self._files()
        return self.document

    # -- sections ---------------------------------------------------------------------------------

    def _summary(self) -> None:
        runs, obs, add = self.runs, self.obs, self.document.add
        metrics = sorted(obs["metric"].unique())
        measured = ", ".join(f"`{self.options.column(m)}`" for m in metrics) or "nothing (no trials)"
        how = (
            "the best dev value over the trial's evaluations (the paper's model selection on dev)"
            if self.options.use == "best"
            else "the dev value at the trial's last evaluation"
        )
        counted = " and ".join(self.options.counted_outcomes)
        add(
            Text(
                f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by dicelab {__version__} from "
                f"`{runs.tracking_uri}`."
            ),
            Text(
                f"Each trial contributes {measured}: {how}. Trials that ended {counted} count; the others "
                f"are listed at the end and never averaged in. Intervals are two-sided "
                f"{self.level} Student-t intervals over seeds."
            ),
            Heading("Trials"),
        )
        outcomes = [o for o in OUTCOME_ORDER if (obs["outcome"] == o).any()]
        outcomes += sorted(set(obs["outcome"]) - set(outcomes))
        rows = []
        for experiment in runs.experiments:
            own = obs[obs["experiment"] == experiment]
            counts = own["outcome"].value_counts()
            rows.append(
                [
                    experiment,
                    str(len(own)),
                    *(str(counts.get(o, 0)) for o in outcomes),
                    str(own["usable"].sum()),
                ]
            )
        add(Table(["experiment", "trials", *outcomes, "usable"], rows))
        if len(runs.parents):
            per_sweep = obs.groupby(["experiment", "sweep_id"]).size()
            add(
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
        if self.notes:
            add(Heading("Read this first"), Bullets(self.notes))

    def _ablation(self) -> None:
        if self.ablation.empty:
            return
        add = self.document.add
        add(
            Heading("Ablation: loss × data variant"),
            Text(
                f"Layout of the paper's Table 8. Each cell: mean ± {self.level} CI half-width over seeds, "
                "in parentheses the difference to CE on the same data variant. Rows marked (paper) are "
                "the numbers from the sweep config's `paper.results`."
            ),
        )
        keys = ["experiment", "task", "metric"]
        for (experiment, task, metric), table in self.ablation.groupby(keys, sort=False):
            unit = table["unit"].iloc[0]
            add(Heading(self._group_title(experiment, task, metric), 3))
            variants = sorted(set(table["variant"]), key=lambda name: paper_order(name, VARIANT_ORDER))
            usual_n = Counter(table.loc[table["n"] > 0, "n"]).most_common(1)
            usual_n = usual_n[0][0] if usual_n else 0
            cells = table.set_index(["loss", "variant"])
            rows = []
            for loss in dict.fromkeys(table["loss"]):
                rows.append([f"`{loss}`", *(_cell(cells, loss, v, usual_n) for v in variants)])
                if table.loc[table["loss"] == loss, "paper"].notna().any():
                    rows.append([f"`{loss}` (paper)", *(_paper_cell(cells, loss, v) for v in variants)])
            n_text = f"n = {usual_n} seeds per cell unless marked" if usual_n else "no usable trials"
            add(
                Table(
                    ["loss", *variants], rows, caption=f"{value_label(metric, unit, self.options)}; {n_text}"
                )
            )
            deltas = table[table["loss"] != "ce"].dropna(subset=["delta"])
            if len(deltas):
                add(
                    Table(
                        ["loss", "variant", "Δ vs CE", f"{self.level} CI (Welch)", "paper Δ"],
                        [
                            [
                                f"`{r.loss}`",
                                r.variant,
                                f"{r.delta:+.2f}",
                                _interval(r.delta_ci_low, r.delta_ci_high, signed=True),
                                f"{r.paper_delta:+.2f}" if math.isfinite(r.paper_delta) else "",
                            ]
                            for r in deltas.itertuples()
                        ],
                        caption="an interval that excludes 0 is a difference the seeds cannot explain",
                    )
                )
            chosen = table[table["configs"] > 1]
            if len(chosen):
                add(
                    Text(
                        "Losses whose hyperparameters were swept show their best configuration per variant, "
                        "chosen on these same dev numbers (optimistic, as in the paper):"
                    ),
                    Table(
                        ["loss", "variant", "configuration", "of"],
                        [
                            [f"`{r.loss}`", r.variant, f"`{r.config}`", str(r.configs)]
                            for r in chosen.itertuples()
                        ],
                    ),
                )

    def _sensitivity(self) -> None:
        if self.curves.empty:
            return
        self.document.add(
            Heading("Sensitivity to hyperparameters"),
            Text(
                f"Lines: mean over seeds; band: {self.level} t-interval; dots: single seeds; star: the best "
                "mean; X: the paper's number where the sweep config gives one (`paper.sensitivity`)."
            ),
        )
        figures: dict[tuple[str, str, str, str], list[CurveLine]] = {}
        for line in self.lines:
            figures.setdefault(line.figure, []).append(line)
        for (task, metric, loss, param), lines in figures.items():
            rows = self.curves[
                (self.curves["task"] == task)
                & (self.curves["metric"] == metric)
                & (self.curves["loss"] == loss)
                & (self.curves["param"] == param)
            ]
            if rows.empty:
                continue
            unit, relation = rows["unit"].iloc[0], lines[0].param.relation
            y_label = value_label(metric, unit, self.options)
            single = bool((rows["n"] <= 1).all())
            subtitle = (
                "one seed per point: no interval" if single else f"band: {self.level} t-interval over seeds"
            )
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
                rows, points, param=param, relation=relation, y_label=y_label, title=title
            )
            path = self._save(figure, "sensitivity", task, metric, loss, param)
            self.document.add(
                Heading(f"{loss}: {short_name(param)} ({task})", 3), Image(path, title.splitlines()[0])
            )
            if relation:
                self.document.add(Text(f"`{relation}` in every trial of this sweep, so one axis shows both."))
            averaged = lines[0].averaged_over
            if averaged:
                self.document.add(
                    Text(
                        f"Pooled over `{averaged}` (more values than lines can show): each point's interval "
                        "mixes that parameter's effect with the seeds' spread."
                    )
                )
            self.document.add(
                Bullets([_optimum_sentence(line_rows, param) for _, line_rows in rows.groupby("line")])
            )
            self.document.add(self._curve_table(rows, param))

    def _curve_table(self, rows: pd.DataFrame, param: str) -> Table:
        show_paper = rows["paper"].notna().any()
        show_failed = bool((rows["n_failed"] + rows["n_missing"] > 0).any())
        header = ["line", short_name(param), "n", "mean", f"{self.level} CI"]
        header += ["failed / missing"] if show_failed else []
        header += ["paper"] if show_paper else []
        table_rows = []
        for r in rows.itertuples():
            row = [r.line, format_value(r.x), str(r.n), _number(r.mean), _interval(r.ci_low, r.ci_high)]
            row += [f"{r.n_failed} / {r.n_missing}"] if show_failed else []
            row += [_number(r.paper) if math.isfinite(r.paper) else ""] if show_paper else []
            if r.is_optimum:
                row[1] = f"**{row[1]}** (best)"
            table_rows.append(row)
        return Table(header, table_rows)

    def _importance(self) -> None:
        table, notes = self.importance.table, self.importance.notes
        if table.empty and not notes:
            return
        add = self.document.add
        add(
            Heading("Hyperparameter importance"),
            Text(
                "Optuna's PED-ANOVA (what separates the top trials from the rest) and fANOVA (share of the "
                "metric's variance a parameter explains, from a random forest) on the usable trials. "
                f"`{SEED}` is included as a yardstick: a hyperparameter no more important than the seed is "
                "indistinguishable from seed noise in this sweep."
            ),
        )
        for (experiment, task, metric), rows in table.groupby(["experiment", "task", "metric"], sort=False):
            title = f"Importance for {metric_label(metric)} · task {task}" + (
                f" · {experiment}" if self.several else ""
            )
            path = self._save(
                plots.importance_figure(rows, title=title), "importance", experiment, task, metric
            )
            wide = rows.pivot_table(
                index=["scope", "param"], columns="evaluator", values="importance", sort=False
            )
            add(
                Heading(self._group_title(experiment, task, metric), 3),
                Image(path, title),
                Table(
                    ["scope", "param", *wide.columns],
                    [
                        [scope, f"`{param}`", *(f"{v:.3f}" for v in values)]
                        for (scope, param), values in wide.iterrows()
                    ],
                ),
            )
        if notes:
            add(Bullets(notes))

    def _parallel_coordinates(self) -> None:
        usable = self.obs[self.obs["usable"]]
        blocks = []
        for (experiment, task, metric), group in usable.groupby(["experiment", TASK, "metric"], sort=True):
            axes = [key for key in (LOSS, VARIANT) if group[key].nunique() > 1]
            axes += [p.name for p in swept_params(group, self.runs.param_columns)]
            axes = axes[:MAX_PARALLEL_AXES]
            if not axes:
                continue
            unit = group["unit"].iloc[0]
            label = value_label(metric, unit, self.options)
            shown = (
                group.sample(MAX_PARALLEL_LINES, random_state=0) if len(group) > MAX_PARALLEL_LINES else group
            )
            which = (
                "Every usable trial" if len(shown) == len(group) else f"{len(shown)} of {len(group)} trials"
            )
            title = f"{which} · task {task}" + (f" · {experiment}" if self.several else "")
            figure = plots.parallel_coordinates_figure(shown, axes, value_label=label, title=title)
            path = self._save(figure, "parallel", experiment, task, metric)
            blocks += [Heading(self._group_title(experiment, task, metric), 3), Image(path, title)]
        if blocks:
            self.document.add(
                Heading("Parallel coordinates"),
                Text("One line per usable trial through the parameters it varied, coloured by its metric."),
                *blocks,
            )

    def _training_curves(self) -> None:
        groups = []
        for (experiment, task, metric, loss), group in self.obs[self.obs["usable"]].groupby(
            ["experiment", TASK, "metric", LOSS], sort=True
        ):
            labelled = group.assign(config=self._config_labels(group))
            means = labelled.groupby("config")["value"].mean().sort_values(ascending=False)
            best = list(means.index[:MAX_CURVE_CONFIGS])
            groups.append(
                ((experiment, task, metric, loss), labelled[labelled["config"].isin(best)], best, len(means))
            )
        if not groups:
            return
        blocks = []
        for metric in sorted({key[2] for key, *_ in groups}):
            run_ids = [rid for key, rows, *_ in groups if key[2] == metric for rid in rows["run_id"]]
            history = load_histories(self.runs, run_ids, names.dev_metric(metric))
            for (experiment, task, _metric, loss), rows, best, total in (
                g for g in groups if g[0][2] == metric
            ):
                points = history.merge(rows[["run_id", "config", "scale"]], on="run_id")
                if points.empty:
                    continue
                points["value"] = points["value"] * points["scale"]
                curves = (
                    points.groupby(["config", "step"], sort=False)["value"]
                    .agg(mean="mean", n="size")
                    .reset_index()
                )
                curves["config"] = pd.Categorical(curves["config"], categories=best, ordered=True)
                curves = curves.sort_values(["config", "step"])
                curves["config"] = curves["config"].astype(str)
                unit = rows["unit"].iloc[0]
                title = f"{loss}: dev {metric_label(metric)} during training · task {task}" + (
                    f" · {experiment}" if self.several else ""
                )
                y_label = f"dev {metric_label(metric)}" + (f" ({unit})" if unit else "") + ", mean over seeds"
                figure = plots.training_curves_figure(curves, y_label=y_label, title=title)
                path = self._save(figure, "training", experiment, task, metric, loss)
                blocks += [Heading(f"{loss} ({task})", 3), Image(path, title)]
                if total > len(best):
                    blocks.append(
                        Text(f"The {len(best)} best of {total} configurations by mean, for legibility.")
                    )
        if blocks:
            self.document.add(
                Heading("Training curves"),
                Text(
                    f"`{names.dev_metric('<metric>')}` at each evaluation, mean over a configuration's seeds."
                ),
                *blocks,
            )

    def _excluded_trials(self) -> None:
        excluded = self.obs[~self.obs["usable"]]
        if excluded.empty:
            return
        listed = excluded.head(MAX_LISTED_TRIALS)
        rows = [
            [
                *([r["experiment"]] if self.several else []),
                f"`{r['trial_id']}`" if pd.notna(r["trial_id"]) else "",
                f"`{r['run_id']}`",
                str(r[LOSS]),
                str(r[VARIANT]),
                format_value(r[SEED]) if SEED in r and pd.notna(r[SEED]) else "",
                r["exclusion"],
                str(r["reason"]) if pd.notna(r["reason"]) else "",
            ]
            for _, r in listed.iterrows()
        ]
        header = [
            *(["experiment"] if self.several else []),
            "trial",
            "run",
            "loss",
            "variant",
            "seed",
            "why",
            "reason",
        ]
        self.document.add(Heading("Trials not counted"), Table(header, rows))
        if len(excluded) > len(listed):
            self.document.add(
                Text(f"…and {len(excluded) - len(listed)} more: see `trials.csv` (column `exclusion`).")
            )

    def _files(self) -> None:
        tables = {
            "trials.csv": self.obs.drop(columns=["logged_metrics"]),
            "sensitivity.csv": self.curves,
            "ablation.csv": self.ablation,
            "importance.csv": self.importance.table,
        }
        for name, frame in tables.items():
            frame.to_csv(self.root / name, index=False)
        self.document.add(
            Heading("Files"),
            Bullets(
                [
                    "`trials.csv`: a row per trial: params, metrics, outcome, the value used, any exclusion",
                    "`sensitivity.csv`: the numbers behind the sensitivity figures",
                    "`ablation.csv`: the ablation tables, with Δ intervals and the paper's numbers",
                    "`importance.csv`: PED-ANOVA and fANOVA importances",
                    *(["`figures/`: every figure as PNG"] if (self.root / "figures").is_dir() else []),
                ]
            ),
        )

    # -- helpers ----------------------------------------------------------------------------------

    def _caveats(self) -> list[str]:
        obs, runs, options, notes = self.obs, self.runs, self.options, []
        counted = obs["outcome"].isin(options.counted_outcomes)
        if len(obs) == 0:
            return ["There are no trials to analyze yet."]
        if not obs["usable"].any():
            return [f"None of the {len(obs)} trials has a usable value: see 'Trials not counted' below."]
        if not self.curves.empty:
            points = self.curves[self.curves["n"] > 0]
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
        elif obs["usable"].any() and not (self.ablation["n"] >= 2).any():
            notes.append("Every cell has a single usable seed: no confidence interval can be given.")
        usable = obs[obs["usable"]]
        seeds = [*self.curves["n"], *self.ablation["n"]]
        fewest = min((n for n in seeds if n >= 2), default=0)
        if fewest in (2, 3):
            t = stats.t.ppf(0.5 + options.confidence / 2, fewest - 1)
            notes.append(
                f"With {fewest} seeds a {self.level} t-interval reaches ±{t:.1f} standard errors, so "
                "intervals are wide (and can leave the metric's range); more seeds narrow them quickly."
            )
        zero = usable.groupby(["experiment", TASK, "metric", LOSS])["value"].agg(
            lambda v: len(v) > 1 and (v == 0).all()
        )
        for (experiment, task, metric, loss), _ in zero[zero].items():
            where = f"`{task}`" + (f" in `{experiment}`" if self.several else "")
            notes.append(
                f"`{loss}` scored 0 {metric_label(metric)} in every trial of {where}: nothing was learned "
                "to compare (an F1 of 0 means no positive was ever predicted right)."
            )
        for (experiment, task, metric), values in usable.groupby(["experiment", TASK, "metric"])["value"]:
            if len(values) > 1 and values.nunique() == 1:
                where = f"`{task}`" + (f" in `{experiment}`" if self.several else "")
                notes.append(
                    f"Every usable trial of {where} has the same {metric_label(metric)}, "
                    f"{values.iloc[0]:.2f}: there is nothing to compare (a model that predicts one class "
                    "everywhere does this; train longer or on more data)."
                )
        nan = int((counted & (obs["exclusion"] == "metric is NaN or inf")).sum())
        missing = int((counted & (obs["exclusion"] == "metric not logged")).sum())
        if nan or missing:
            notes.append(
                f"{_count(nan + missing, 'finished trial')} without a finite value "
                f"({nan} NaN/inf, {missing} not logged): counted as missing, not averaged."
            )
        early = int((obs["outcome"] == names.EARLY_STOPPED).sum())
        if early:
            notes.append(
                f"{_count(early, 'trial')} stopped early (scheduler or patience); "
                + (
                    "their best value so far counts as an observation of their configuration."
                    if options.include_early_stopped
                    else "they are excluded (--exclude-early-stopped)."
                )
            )
        running = int(obs["outcome"].isin(["running"]).sum())
        if running:
            notes.append(f"{_count(running, 'trial')} still running, not counted yet.")
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
        repeated = self._repeated_seeds()
        if repeated:
            notes.append(
                f"{_count(repeated, 'configuration')} ran the same seed more than once (across sweep "
                "invocations); each run counts, which can make intervals look tighter than the seeds justify."
            )
        if runs.duplicates_dropped:
            notes.append(
                f"{_count(runs.duplicates_dropped, 'older run')} of resumed trials superseded and left out."
            )
        if runs.ignored_runs:
            notes.append(
                f"{_count(runs.ignored_runs, 'run')} without a `{names.ROLE}` tag of trial or parent ignored."
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

    def _config_labels(self, group: pd.DataFrame) -> list[str]:
        """Per trial, what sets its configuration apart within `group`: "+positive · alpha=0.3, beta=0.7"."""
        params = swept_params(group, self.runs.param_columns)
        shown = [name for p in params for name in (p.name, *p.followers)]
        with_variant = group[VARIANT].nunique() > 1 or not shown
        labels = []
        for variant, *values in group[[VARIANT, *shown]].itertuples(index=False):
            parts = (variant if with_variant else "", config_label(zip(shown, values, strict=True)))
            labels.append(" · ".join(part for part in parts if part))
        return labels

    def _repeated_seeds(self) -> int:
        if SEED not in self.obs:
            return 0
        keys = ["experiment", TASK, LOSS, VARIANT, *(c for c in self.runs.param_columns if c != SEED)]
        usable = self.obs[self.obs["usable"]]
        keys = [k for k in dict.fromkeys(keys) if k in usable]
        repeated = usable[usable.duplicated(subset=[*keys, SEED], keep=False)]
        return int(repeated.drop_duplicates(subset=keys).shape[0]) if len(repeated) else 0

    def _group_title(self, experiment: str, task: str, metric: str) -> str:
        title = f"task `{task}` · {metric_label(metric)}"
        return f"{experiment} · {title}" if self.several else title

    def _save(self, figure: plots.Figure, kind: str, *parts: str) -> Path:
        stem = "_".join(_slug(str(part)) for part in (kind, *parts))
        path = self.root / "figures" / f"{stem}.png"
        counter = 2
        while path.exists():
            path = self.root / "figures" / f"{stem}_{counter}.png"
            counter += 1
        return plots.save_figure(figure, path)


def _cell(cells: pd.DataFrame, loss: str, variant: str, usual_n: int) -> str:
    if (loss, variant) not in cells.index:
        return "—"
    row = cells.loc[(loss, variant)]
    extras = []
    if row["n"] != usual_n or row["n"] == 1:
        extras.append(f"n={row['n']}" + (", no CI" if row["n"] == 1 else ""))
    if row["n_failed"]:
        extras.append(f"{row['n_failed']} failed")
    if row["n_missing"]:
        extras.append(f"{row['n_missing']} missing")
    text = "—" if row["n"] == 0 else _number(row["mean"])
    if math.isfinite(row["ci_high"]):
        text += f" ± {(row['ci_high'] - row['ci_low']) / 2:.2f}"
    if loss != "ce" and math.isfinite(row["delta"]):
        text += f" ({row['delta']:+.2f})"
    return text + (f" [{'; '.join(extras)}]" if extras else "")


def _paper_cell(cells: pd.DataFrame, loss: str, variant: str) -> str:
    if (loss, variant) not in cells.index or not math.isfinite(cells.loc[(loss, variant), "paper"]):
        return ""
    row = cells.loc[(loss, variant)]
    delta = f" ({row['paper_delta']:+.2f})" if loss != "ce" and math.isfinite(row["paper_delta"]) else ""
    return f"{row['paper']:.2f}{delta}"


def _optimum_sentence(rows: pd.DataFrame, param: str) -> str:
    line = rows["line"].iloc[0]
    best = rows[rows["is_optimum"]]
    if best.empty:
        if rows["mean"].notna().any():
            ties = rows[rows["mean"] == rows["mean"].max()]
            values = ", ".join(format_value(x) for x in ties["x"])
            tied_at = _number(ties["mean"].iloc[0])
            return f"{line}: no single best `{short_name(param)}`: {values} tie at {tied_at}"
        return f"{line}: no usable trials"
    top = best.iloc[0]
    where = f"{line}: best `{short_name(param)}` = {format_value(top['x'])}"
    if top["n"] < 2:
        return f"{where} ({_number(top['mean'])}, single seed: no interval)"
    others = rows[~rows["is_optimum"] & rows["ci_high"].notna()]
    overlapping = int(((others["ci_high"] >= top["ci_low"]) & (others["ci_low"] <= top["ci_high"])).sum())
    spread = f"{_number(top['mean'])} ± {(top['ci_high'] - top['ci_low']) / 2:.2f}, n={top['n']}"
    if not len(others):
        return f"{where} ({spread})"
    verdict = (
        "clearly ahead of every other value"
        if overlapping == 0
        else f"its interval overlaps those of {overlapping} of {len(others)} other values"
    )
    return f"{where} ({spread}); {verdict}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _number(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "—"


def _interval(low: float, high: float, *, signed: bool = False) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "—"
    return f"[{low:+.2f}, {high:+.2f}]" if signed else f"[{low:.2f}, {high:.2f}]"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-") or "x"


def _check_replaceable(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "report.md").is_file())):
        raise DicelabError(f"{out} exists and is not a dicelab report folder; choose another --out")


def _replace_dir(staging: Path, out: Path) -> None:
    """Swap the finished report in; an older report in `out` is removed only once the new one is in place."""
    _check_replaceable(out)
    if not out.exists():
        staging.rename(out)
        return
    old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
    out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _log_report(runs: RunSet, out: Path) -> str:
    client = MlflowClient(tracking_uri=runs.tracking_uri)
    try:
        run_id = runs.report_run or _analysis_run(client, runs.experiment_ids[runs.experiments[0]])
        with quiet_artifact_transfers():
            client.log_artifacts(run_id, str(out), artifact_path=names.REPORT_DIR)
    except (MlflowException, OSError) as error:
        raise TrackingError(f"the report is in {out} but logging it to MLflow failed: {error}") from None
    return run_id


def _analysis_run(client: MlflowClient, experiment_id: str) -> str:
    """The experiment's "analysis" run (created once) for experiments without a sweep parent run."""
    existing = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{names.ROLE}` = '{names.ROLE_ANALYSIS}'",
        max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    if existing:
        return existing[0].info.run_id
    run = client.create_run(experiment_id, run_name="analysis", tags={names.ROLE: names.ROLE_ANALYSIS})
    client.set_terminated(run.info.run_id)
    return run.info.run_id
