"""Reading a sweep's runs from MLflow into one tidy table: a row per trial, params and metrics as columns."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dicelab.analysis._run_tables import RunTables, read_histories, read_run_tables
from dicelab.analysis._store import (
    ArtifactUnavailable,
    download_artifact,
    find_experiment,
    open_store,
)
from dicelab.analysis.paper import PaperNumbers, paper_from_config, paper_from_params
from dicelab.config.yaml_loader import load_yaml
from dicelab.errors import TrackingError
from dicelab.tracking import conventions as names
from dicelab.tracking import lifecycle

# Tags that become columns of every run row.
TAG_COLUMNS = {
    names.ROLE: "role",
    "mlflow.parentRunId": "parent_run_id",
    names.SWEEP_NAME: "sweep",
    names.SWEEP_ID: "sweep_id",
    names.TRIAL_ID: "trial_id",
    names.OUTCOME: "outcome",
    names.REASON: "reason",
    names.PRIMARY_METRIC: "metric",
    names.DEGENERATE: "degenerate",  # why a trial's predictions are degenerate (one class), if they are
    names.DEVICE_FALLBACK: "device_fallback",  # a trial given a GPU CUDA could not see trained on CPU
    names.RACE_DECISION: "race_decision",  # on a seed race's parent run
    names.RACE_TEST: "race_test",  # the test that race decided with (analyze uses it unless told otherwise)
    names.RACE_CONFIGURATION: "race_configuration",  # a raced trial's configuration, as the race named it
    names.RACE_ELIMINATION: "race_elimination",  # a dropped trial's race evidence (JSON)
}
# Columns every trial row has besides its params (dotted keys) and metrics (MLflow metric names).
META_COLUMNS = (
    "experiment",
    "run_id",
    "run_name",
    *TAG_COLUMNS.values(),
    "status",
    "start_time",
    "end_time",
    "duration_s",
    "logged_metrics",  # names of the metrics the run logged (a logged NaN and a missing metric differ)
)
_MISSING_PARAM_TEXT = ["", "None", "null", "none"]


@dataclass
class RunSet:
    """Everything `analyze` reads from the store; `trials` has a row per trial (resumed runs deduplicated)."""

    tracking_uri: str
    experiments: list[str]  # the first one is the experiment the report belongs to
    experiment_ids: dict[str, str]
    trials: pd.DataFrame
    parents: pd.DataFrame  # one row per sweep invocation (parent run), newest first
    param_columns: list[str]
    metric_columns: list[str]
    papers: dict[str, PaperNumbers]  # experiment -> the paper's numbers from its sweep config
    duplicates_dropped: int = 0  # runs of a resumed trial that an equal (sweep_id, trial_id) superseded
    ignored_runs: int = 0  # runs that are neither trials nor parents (analysis runs, foreign runs)
    notes: list[str] = field(default_factory=list)

    @property
    def report_run(self) -> str | None:
        """The run a report is logged to: the newest parent run of the first experiment, if any."""
        own = self.parents[self.parents["experiment"] == self.experiments[0]]
        return None if own.empty else str(own.iloc[0]["run_id"])


def load_runs(
    experiments: str | Sequence[str],
    tracking_uri: str | None = None,
    *,
    sweep_ids: Sequence[str] | None = None,
    progress: bool = False,
) -> RunSet:
    """Load every trial of the named experiment(s) (all sweep invocations, or only `sweep_ids`)."""
    # each experiment once: `--compare` naming the analysed one again would count every trial twice
    names_list = [experiments] if isinstance(experiments, str) else list(dict.fromkeys(experiments))
    if not names_list:
        raise TrackingError("no experiment to analyze")
    uri = open_store(tracking_uri)
    found = [find_experiment(uri, name) for name in names_list]
    tables: list[RunTables] = []
    with _progress(progress) as (bar, task):
        for experiment in found:
            already = sum(len(table.info) for table in tables)

            def show(count: int, already: int = already) -> None:
                bar.update(task, description=f"loading runs: {already + count:,}")

            tables.append(read_run_tables(uri, experiment.experiment_id, show))
    runs = pd.concat(
        [_runs_frame(experiment.name, table) for experiment, table in zip(found, tables, strict=True)],
        ignore_index=True,
    ).sort_values("start_time", ascending=False, kind="stable")

    parents = runs[runs["role"] == names.ROLE_PARENT]
    trials = runs[runs["role"] == names.ROLE_TRIAL]
    ignored = int((~runs["role"].isin([names.ROLE_PARENT, names.ROLE_TRIAL, names.ROLE_ANALYSIS])).sum())
    if sweep_ids:
        known = sorted(set(runs["sweep_id"].dropna()))
        missing = [sweep_id for sweep_id in sweep_ids if sweep_id not in known]
        if missing:
            raise TrackingError(
                f"no sweep with id {missing[0]!r} in {', '.join(names_list)} "
                f"(available: {', '.join(known) or 'none'})"
            )
        parents = parents[parents["sweep_id"].isin(sweep_ids)]
        trials = trials[trials["sweep_id"].isin(sweep_ids)]
    trials, dropped = _dedupe(trials)

    keep = set(trials["run_id"])
    every_param = pd.concat([t.params for t in tables], ignore_index=True)  # the parent runs' too
    metrics = pd.concat([t.metrics for t in tables], ignore_index=True)
    params, metrics = every_param[every_param["run_id"].isin(keep)], metrics[metrics["run_id"].isin(keep)]
    param_columns, metric_columns = sorted(params["key"].unique()), sorted(metrics["key"].unique())
    logged = metrics.groupby("run_id")["key"].agg(frozenset)
    trials = trials.assign(logged_metrics=trials["run_id"].map(logged).apply(_as_set))
    trials = trials.join(_wide(params).reindex(columns=param_columns), on="run_id")
    trials = trials.join(_wide(metrics).reindex(columns=metric_columns), on="run_id")
    trials = _typed_params(trials, param_columns)

    notes: list[str] = []
    papers = {}
    for experiment in found:
        own = parents[parents["experiment"] == experiment.name]
        paper, paper_notes = (
            _paper_of(uri, own.iloc[0]["run_id"], every_param) if len(own) else (PaperNumbers(), [])
        )
        papers[experiment.name] = paper
        notes.extend(f"{experiment.name}: {note}" for note in paper_notes)
    return RunSet(
        tracking_uri=uri,
        experiments=names_list,
        experiment_ids={experiment.name: experiment.experiment_id for experiment in found},
        trials=trials.reset_index(drop=True),
        parents=parents.drop(columns="logged_metrics").reset_index(drop=True),
        param_columns=param_columns,
        metric_columns=metric_columns,
        papers=papers,
        duplicates_dropped=dropped,
        ignored_runs=ignored,
        notes=notes,
    )


def load_histories(runs: RunSet, run_ids: Sequence[str], metric_key: str) -> pd.DataFrame:
    """Every logged value of `metric_key` for the given runs: columns run_id, step, value."""
    return read_histories(runs.tracking_uri, list(run_ids), metric_key)


def _runs_frame(experiment: str, tables: RunTables) -> pd.DataFrame:
    """One row per run: its info and the tags analysis reads."""
    info = tables.info
    tags = tables.tags[tables.tags["key"].isin(list(TAG_COLUMNS))]
    tag_columns = _wide(tags).reindex(columns=list(TAG_COLUMNS)).rename(columns=TAG_COLUMNS)
    frame = info.join(tag_columns, on="run_id")
    start = pd.to_datetime(frame["start_time"], unit="ms", utc=True)
    end = pd.to_datetime(frame["end_time"], unit="ms", utc=True)
    status = frame["status"].astype(str)
    return frame.assign(
        experiment=experiment,
        status=status,
        # runs the engine did not tag (still running, interrupted, older runs): the lifecycle's word for it
        outcome=frame["outcome"].fillna(status.map(lifecycle.outcome_of_status)),
        start_time=start,
        end_time=end,
        duration_s=(end - start).dt.total_seconds(),
        logged_metrics=None,
    )[list(META_COLUMNS)]


def _wide(long: pd.DataFrame) -> pd.DataFrame:
    """(run_id, key, value) rows -> one row per run_id, one column per key."""
    if long.empty:
        return pd.DataFrame(index=pd.Index([], name="run_id"))
    return long.drop_duplicates(subset=["run_id", "key"], keep="last").pivot(
        index="run_id", columns="key", values="value"
    )


def _as_set(value: Any) -> frozenset[str]:
    return value if isinstance(value, frozenset) else frozenset()


def _dedupe(trials: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """One row per (experiment, sweep_id, trial_id): a resumed trial keeps its newest run."""
    keyed = trials["sweep_id"].notna() & trials["trial_id"].notna() & (trials["trial_id"] != "local")
    # Rows are sorted newest first, so keep="first" keeps the latest run of each trial.
    duplicate = keyed & trials.duplicated(subset=["experiment", "sweep_id", "trial_id"], keep="first")
    return trials[~duplicate], int(duplicate.sum())


def _typed_params(trials: pd.DataFrame, param_columns: list[str]) -> pd.DataFrame:
    """MLflow stores params as text: numbers become floats, "None" becomes missing, the rest stays text."""
    typed = {}
    for column in param_columns:
        text = trials[column].where(~trials[column].isin(_MISSING_PARAM_TEXT))
        numbers = pd.to_numeric(text, errors="coerce")
        typed[column] = numbers if numbers.notna().sum() == text.notna().sum() else text
    return trials.assign(**typed) if typed else trials


def _paper_of(uri: str, parent_run_id: str, params: pd.DataFrame) -> tuple[PaperNumbers, list[str]]:
    """The `paper:` section of a sweep: its config.yaml artifact, else `paper.*` params of the parent run
    (from `params`, the runs' params already read: run_id, key, value)."""
    with tempfile.TemporaryDirectory() as scratch:
        try:
            path = download_artifact(uri, parent_run_id, names.CONFIG_ARTIFACT, Path(scratch))
            config = load_yaml(path.read_text(encoding="utf-8"))
        except (ArtifactUnavailable, OSError, yaml.YAMLError):
            config = None
    if isinstance(config, dict) and config.get("paper") is not None:
        return paper_from_config(config["paper"])
    own = params[params["run_id"] == parent_run_id]
    return paper_from_params(dict(zip(own["key"], own["value"], strict=True)))


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[tuple[Progress, Any]]:
    columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
    with Progress(*columns, transient=True, disable=not enabled) as bar:
        yield bar, bar.add_task("loading runs", total=None)
