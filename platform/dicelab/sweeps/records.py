"""The MLflow runs of a sweep: finding and creating the child run of a trial (its states, outcome and status
are `dicelab.tracking.lifecycle`'s).

A trial's child run is identified by its tags (sweep id + Tune trial id), never by process state, so a retried
trial, a resumed sweep and the driver's own clean-up all find the same run and no run is ever duplicated.
"""

from __future__ import annotations

from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run

from dicelab.tracking import conventions as names

# The status vocabulary is the lifecycle's: the sweep's view and its counts read these names from here.
from dicelab.tracking.lifecycle import FINISHED as FINISHED
from dicelab.tracking.lifecycle import RUNNING as RUNNING
from dicelab.tracking.lifecycle import STATUS_OF_OUTCOME as STATUS_OF_OUTCOME
from dicelab.tracking.lifecycle import Event, Kind, State, TrialRun, start_run
from dicelab.tracking.lifecycle import outcome_of as outcome_of
from dicelab.tracking.mlflow_adapter import MAX_PARAM_VALUE_LENGTH, MAX_TAG_VALUE_LENGTH, PARENT_RUN_ID_TAG

INTERRUPTED = State.INTERRUPTED.value  # not an outcome tag: a trial stopped with its sweep's driver (KILLED)


def clip(text: Any, limit: int = MAX_TAG_VALUE_LENGTH) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tags_equal(tags: dict[str, str]) -> str:
    return " and ".join(f"tags.`{key}` = '{value}'" for key, value in tags.items())


def find_trial_run(client: MlflowClient, experiment_id: str, sweep_id: str, trial_id: str) -> Run | None:
    runs = client.search_runs(
        [experiment_id], filter_string=_tags_equal({names.SWEEP_ID: sweep_id, names.TRIAL_ID: trial_id})
    )
    return runs[0] if runs else None


def find_point_run(
    client: MlflowClient, experiment_id: str, sweep_id: str, params: dict[str, Any]
) -> Run | None:
    """The sweep's trial run with these params (a configuration on one seed), whatever its trial id."""
    where = " and ".join(
        f"params.`{key}` = '{clip(value, MAX_PARAM_VALUE_LENGTH)}'" for key, value in params.items()
    )
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"{_tags_equal({names.SWEEP_ID: sweep_id, names.ROLE: names.ROLE_TRIAL})} and {where}",
    )
    return runs[0] if runs else None


def trial_runs(client: MlflowClient, experiment_id: str, sweep_id: str) -> list[Run]:
    """Every child run of a sweep (all pages)."""
    runs: list[Run] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=_tags_equal({names.SWEEP_ID: sweep_id, names.ROLE: names.ROLE_TRIAL}),
            max_results=1000,
            page_token=token,
        )
        runs += list(page)
        token = page.token
        if not token:
            return runs


def create_trial_run(
    client: MlflowClient,
    experiment_id: str,
    *,
    run_name: str,
    parent_run_id: str,
    tags: dict[str, str],
    params: dict[str, Any],
) -> str:
    """A RUNNING child run under the sweep's parent, with its params (the trial's flattened config)."""
    run = start_run(
        client, experiment_id, Kind.TRIAL, run_name=run_name, tags={PARENT_RUN_ID_TAG: parent_run_id, **tags}
    )
    log_params(client, run.run_id, params)
    return run.run_id


def log_params(client: MlflowClient, run_id: str, params: dict[str, Any]) -> None:
    """The params in order, in batches (MLflow accepts at most 100 params per batch)."""
    items = [Param(key, clip(value, MAX_PARAM_VALUE_LENGTH)) for key, value in params.items()]
    for start in range(0, len(items), 100):
        client.log_batch(run_id, params=items[start : start + 100])


def discard_cut_short(client: MlflowClient, experiment_id: str, sweep_id: str, last_section: str) -> int:
    """--resume, before any trial starts: delete the sweep's trial runs whose config was not all logged.

    A driver killed between creating a trial's run and logging its config (`create_trial_run`'s batches)
    leaves a run no trial can take over: its configuration is unknown, and Tune starts that trial again
    (under a new trial id when Tune had not saved it yet), which creates its run afresh. `last_section`:
    the first part of the last key of the sweep's flattened config (`tracking`). Every trial's params end
    with that section and their batches go in order, so a run with no param of it was cut short. The
    section, not its last key: a run logged by an older dicelab whose section ended on another key is
    whole. Returns how many were deleted."""
    prefix = f"{last_section}."
    runs = trial_runs(client, experiment_id, sweep_id)
    cut_short = [run for run in runs if not any(key.startswith(prefix) for key in run.data.params)]
    for run in cut_short:
        client.delete_run(run.info.run_id)
    return len(cut_short)


def mark_interrupted(client: MlflowClient, runs: list[Run], reason: str) -> int:
    """Interrupt the child runs still running when the driver stops early (KILLED, with the reason and no
    outcome tag: `--resume` reopens them and their trials continue from their last checkpoint). Returns how
    many."""
    running = [TrialRun.of(client, run) for run in runs if run.info.status == RUNNING]
    for trial_run in running:
        trial_run.send(Event.INTERRUPT, reason=reason)
    return len(running)


def log_best_from_history(client: MlflowClient, run: Run, metric: str) -> None:
    """best_dev_* and best_step of a run that was stopped from outside (the trial could not log them)."""
    history = client.get_metric_history(run.info.run_id, names.dev_metric(metric))
    if not history:
        return
    sign = -1.0 if run.data.params.get("train.mode") == "min" else 1.0  # a minimised metric: its lowest
    best = max(history, key=lambda point: (sign * point.value, -point.step))
    values = {names.BEST_STEP: float(best.step)}
    for key in run.data.metrics:
        if key.startswith(names.DEV_PREFIX):
            history = client.get_metric_history(run.info.run_id, key)
            at_best = [point.value for point in history if point.step == best.step]
            if at_best:
                values[names.best_metric(key.removeprefix(names.DEV_PREFIX))] = at_best[-1]
    metrics = [Metric(key, value, best.timestamp, best.step) for key, value in values.items()]
    client.log_batch(run.info.run_id, metrics=metrics)
