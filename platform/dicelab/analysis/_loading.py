"""Reading a sweep's runs from MLflow into one tidy table: a row per trial, params and metrics as columns."""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import yaml
from mlflow.entities import Run, ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dicelab.analysis._paper import PaperNumbers, paper_from_config, paper_from_params
from dicelab.analysis._store import find_experiment, open_client, quiet_artifact_transfers
from dicelab.errors import TrackingError
from dicelab.tracking import conventions as names

# Columns every trial row has besides its params (dotted keys) and metrics (MLflow metric names).
META_COLUMNS = (
    "experiment",
    "run_id",
    "run_name",
    "role",
    "parent_run_id",
    "sweep",
    "sweep_id",
    "trial_id",
    "status",
    "outcome",
    "reason",
    "metric",
    "start_time",
    "end_time",
    "duration_s",
    "logged_metrics",  # names of the metrics the run logged (a logged NaN and a missing metric differ)
)
PARENT_RUN_TAG = "mlflow.parentRunId"
ROLE_ANALYSIS = "analysis"  # the run that holds a report when an experiment has no parent run
PAGE_SIZE = 10_000  # runs per search page (the SQLite store accepts up to 50,000)
# MLflow status -> outcome, for runs the engine did not tag (still running, killed, older runs).
_STATUS_OUTCOMES = {
    "FINISHED": names.COMPLETED,
    "FAILED": names.FAILED,
    "RUNNING": "running",
    "SCHEDULED": "running",
    "KILLED": "killed",
}
_MISSING_PARAM_TEXT = {"", "None", "null", "none"}


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
    names_list = [experiments] if isinstance(experiments, str) else list(experiments)
    if not names_list:
        raise TrackingError("no experiment to analyze")
    client, uri = open_client(tracking_uri)
    found = [find_experiment(client, name) for name in names_list]
    records: list[dict[str, Any]] = []
    with _progress(progress) as (bar, task):
        for experiment in found:
            for page in _search_pages(client, experiment.experiment_id):
                records.extend(_record(experiment.name, run) for run in page)
                bar.update(task, description=f"loading runs: {len(records):,}")
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        frame = pd.DataFrame(columns=[*META_COLUMNS, "_params"])
    frame = frame.sort_values("start_time", ascending=False, kind="stable").reset_index(drop=True)

    parents = frame[frame["role"] == names.ROLE_PARENT]
    trials = frame[frame["role"] == names.ROLE_TRIAL]
    ignored = int(len(frame) - len(parents) - len(trials) - (frame["role"] == ROLE_ANALYSIS).sum())
    if sweep_ids:
        known = sorted(set(frame["sweep_id"].dropna()))
        missing = [sweep_id for sweep_id in sweep_ids if sweep_id not in known]
        if missing:
            raise TrackingError(
                f"no sweep with id {missing[0]!r} in {', '.join(names_list)} "
                f"(available: {', '.join(known) or 'none'})"
            )
        parents = parents[parents["sweep_id"].isin(sweep_ids)]
        trials = trials[trials["sweep_id"].isin(sweep_ids)]
    trials, dropped = _dedupe(trials)

    param_columns = sorted(set().union(*trials["_params"])) if len(trials) else []
    metric_columns = sorted(set().union(*trials["logged_metrics"])) if len(trials) else []
    # Keep only the columns the trials use (parents log sweep-level params of their own).
    trials = _typed_params(trials[[*META_COLUMNS, *param_columns, *metric_columns]], param_columns)
    parents = parents[list(META_COLUMNS)].reset_index(drop=True)

    notes: list[str] = []
    papers = {}
    for experiment in found:
        own = parents[parents["experiment"] == experiment.name]
        paper, paper_notes = _paper_of(client, own.iloc[0]) if not own.empty else (PaperNumbers(), [])
        papers[experiment.name] = paper
        notes.extend(f"{experiment.name}: {note}" for note in paper_notes)
    return RunSet(
        tracking_uri=uri,
        experiments=names_list,
        experiment_ids={experiment.name: experiment.experiment_id for experiment in found},
        trials=trials.reset_index(drop=True),
        parents=parents,
        param_columns=param_columns,
        metric_columns=metric_columns,
        papers=papers,
        duplicates_dropped=dropped,
        ignored_runs=ignored,
        notes=notes,
    )


def load_histories(
    runs: RunSet, run_ids: Sequence[str], metric_key: str, *, progress: bool = False
) -> pd.DataFrame:
    """Every logged value of `metric_key` for the given runs: columns run_id, step, value."""
    client = MlflowClient(tracking_uri=runs.tracking_uri)
    rows: list[tuple[str, int, float]] = []
    with _progress(progress, total=len(run_ids)) as (bar, task):
        for run_id in run_ids:
            try:
                history = client.get_metric_history(run_id, metric_key)
            except MlflowException as error:
                raise TrackingError(f"cannot read {metric_key} of run {run_id}: {error}") from None
            rows.extend((run_id, point.step, point.value) for point in history)
            bar.update(task, advance=1, description=f"loading {metric_key} curves")
    return pd.DataFrame(rows, columns=["run_id", "step", "value"])


def _search_pages(client: MlflowClient, experiment_id: str) -> Iterator[list[Run]]:
    token: str | None = None
    while True:
        try:
            page = client.search_runs(
                [experiment_id], run_view_type=ViewType.ACTIVE_ONLY, max_results=PAGE_SIZE, page_token=token
            )
        except MlflowException as error:
            raise TrackingError(f"cannot search runs in {client.tracking_uri}: {error}") from None
        yield list(page)
        token = page.token
        if not token:
            return


def _record(experiment: str, run: Run) -> dict[str, Any]:
    info, tags = run.info, run.data.tags
    status = info.status if isinstance(info.status, str) else str(info.status)
    start = pd.Timestamp(info.start_time, unit="ms", tz="UTC") if info.start_time else pd.NaT
    end = pd.Timestamp(info.end_time, unit="ms", tz="UTC") if info.end_time else pd.NaT
    record: dict[str, Any] = {
        "experiment": experiment,
        "run_id": info.run_id,
        "run_name": info.run_name,
        "role": tags.get(names.ROLE),
        "parent_run_id": tags.get(PARENT_RUN_TAG),
        "sweep": tags.get(names.SWEEP_NAME),
        "sweep_id": tags.get(names.SWEEP_ID),
        "trial_id": tags.get(names.TRIAL_ID),
        "status": status,
        "outcome": tags.get(names.OUTCOME) or _STATUS_OUTCOMES.get(status, status.lower()),
        "reason": tags.get(names.REASON),
        "metric": tags.get(names.PRIMARY_METRIC),
        "start_time": start,
        "end_time": end,
        "duration_s": (end - start).total_seconds() if info.start_time and info.end_time else math.nan,
        "logged_metrics": frozenset(run.data.metrics),
        "_params": tuple(run.data.params),
    }
    record.update(run.data.params)
    record.update(run.data.metrics)
    return record


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
        if column not in trials.columns:
            continue
        text = trials[column].where(~trials[column].isin(_MISSING_PARAM_TEXT))
        numbers = pd.to_numeric(text, errors="coerce")
        typed[column] = numbers if numbers.notna().sum() == text.notna().sum() else text
    return trials.assign(**typed) if typed else trials


def _paper_of(client: MlflowClient, parent: pd.Series) -> tuple[PaperNumbers, list[str]]:
    """The `paper:` section of a sweep: its config.yaml artifact, else `paper.*` params of the parent run."""
    with tempfile.TemporaryDirectory() as scratch, quiet_artifact_transfers():
        try:
            path = mlflow.artifacts.download_artifacts(
                run_id=parent["run_id"],
                artifact_path=names.CONFIG_ARTIFACT,
                dst_path=scratch,
                tracking_uri=client.tracking_uri,
            )
            config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (MlflowException, OSError, yaml.YAMLError):
            config = None
    if isinstance(config, dict) and config.get("paper") is not None:
        return paper_from_config(config["paper"])
    params = client.get_run(parent["run_id"]).data.params
    return paper_from_params(params)


@contextlib.contextmanager
def _progress(enabled: bool, total: int | None = None) -> Iterator[tuple[Progress, Any]]:
    columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
    with Progress(*columns, transient=True, disable=not enabled) as bar:
        yield bar, bar.add_task("loading runs", total=total)
