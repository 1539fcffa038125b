"""The writers of dicelab's runs go through the lifecycle (`dicelab.tracking.lifecycle`): a sweep's parent
run opened, ended (completed, failed, interrupted, the driver's error) and resumed, a trial's run and an
analysis run created through START, and the analysis reading the status back in the lifecycle's words. A
real SQLite store, no Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient

from dicelab.analysis import load_runs
from dicelab.analysis.publishing import _analysis_run
from dicelab.experiment import load_experiment
from dicelab.sweeps import records
from dicelab.sweeps.parent_run import close_parent_run, end_parent_run, open_parent_run, start_or_resume
from dicelab.sweeps.space import plan_sweep
from dicelab.sweeps.state import SweepState
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import Event, TrialRun
from dicelab.tracking.store import check_tracking, ensure_experiment

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> MlflowClient:
    uri = f"sqlite:///{tmp_path_factory.mktemp('callers') / 'mlflow.db'}"
    check_tracking(uri)
    return MlflowClient(uri)


@pytest.fixture(scope="module")
def quickstart():
    config = load_experiment(ROOT / "experiments" / "quickstart.yaml")
    return config, plan_sweep(config, "quickstart.yaml")


def _sweep(client: MlflowClient, quickstart, name: str) -> SweepState:
    config, plan = quickstart
    experiment = ensure_experiment(client, name)
    parent = open_parent_run(client, experiment, config, plan, "s1")
    return SweepState("s1", name, experiment, parent, client.tracking_uri, "digest", "now")


def _trial(client: MlflowClient, state: SweepState, trial_id: str, ending: Event | None) -> None:
    run_id = records.create_trial_run(
        client,
        state.experiment_id,
        run_name=trial_id,
        parent_run_id=state.parent_run_id,
        tags={names.SWEEP_ID: state.sweep_id, names.TRIAL_ID: trial_id},
        params={"loss.name": "ce"},
    )
    if ending is not None:
        TrialRun(client, run_id).send(ending)


def test_a_parent_run_opens_running_with_its_role(client, quickstart):
    state = _sweep(client, quickstart, "opened")
    run = client.get_run(state.parent_run_id)
    assert run.info.status == "RUNNING" and run.data.tags[names.ROLE] == names.ROLE_PARENT
    assert run.data.tags[names.SWEEP_ID] == "s1"


@pytest.mark.parametrize(
    ("trials", "interrupted", "status", "outcome"),
    [
        ([Event.COMPLETE, Event.FAIL], False, "FINISHED", "completed"),
        ([Event.FAIL], False, "FAILED", "failed"),
        ([Event.COMPLETE, None], True, "KILLED", "interrupted"),
    ],
)
def test_a_parent_run_ends_as_its_trials_did_and_the_analysis_reads_it_so(
    client, quickstart, trials, interrupted, status, outcome
):
    name = f"closed-{status.lower()}"
    state = _sweep(client, quickstart, name)
    for index, ending in enumerate(trials):
        _trial(client, state, f"t{index}", ending)
    runs = records.trial_runs(client, state.experiment_id, state.sweep_id)
    if interrupted:
        records.mark_interrupted(client, runs, "the sweep was interrupted")
        runs = records.trial_runs(client, state.experiment_id, state.sweep_id)
    close_parent_run(client, state, runs, "f1", interrupted=interrupted)
    assert client.get_run(state.parent_run_id).info.status == status
    loaded = load_runs(name, client.tracking_uri)
    assert list(loaded.parents["outcome"]) == [outcome]
    if interrupted:  # the trial stopped with its driver: the same word, not MLflow's "killed"
        assert "interrupted" in set(loaded.trials["outcome"])


@pytest.mark.parametrize(
    ("error", "status"), [(KeyboardInterrupt(), "KILLED"), (RuntimeError("x"), "FAILED")]
)
def test_a_driver_that_raised_ends_its_parent_run(client, quickstart, error, status):
    state = _sweep(client, quickstart, f"raised-{status.lower()}")
    end_parent_run(client, state, error)
    assert client.get_run(state.parent_run_id).info.status == status


def test_resume_reopens_an_ended_parent_run(client, quickstart, tmp_path):
    config, plan = quickstart
    state = _sweep(client, quickstart, "resumed")
    close_parent_run(client, state, [], "f1", interrupted=True)
    start_or_resume(client, config, plan, tmp_path, "", client.tracking_uri, (state, tmp_path))
    assert client.get_run(state.parent_run_id).info.status == "RUNNING"


def test_an_analysis_run_is_created_once_and_completed(client):
    experiment = ensure_experiment(client, "analysis-only")
    first = _analysis_run(client, experiment)
    assert _analysis_run(client, experiment) == first
    run = client.get_run(first)
    assert (run.data.tags[names.ROLE], run.info.status) == (names.ROLE_ANALYSIS, "FINISHED")
