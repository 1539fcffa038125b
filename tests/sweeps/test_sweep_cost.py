"""A sweep's cost on its parent run: the trials' CPU- and GPU-seconds summed in hours (real SQLite store)."""

from __future__ import annotations

import io
import time

import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric
from rich.console import Console

from dicelab.sweeps import records
from dicelab.sweeps.parent_run import (
    COST_CPU_HOURS,
    COST_GPU_HOURS,
    COST_TRIALS,
    best_run,
    close_parent_run,
    model_line,
    print_closing,
)
from dicelab.sweeps.state import SweepState
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import Event, TrialRun
from dicelab.tracking.store import check_tracking, ensure_experiment


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> MlflowClient:
    # one store for the module (creating its schema takes seconds); each test writes its own experiment
    uri = f"sqlite:///{tmp_path_factory.mktemp('cost') / 'mlflow.db'}"
    check_tracking(uri)
    return MlflowClient(uri)


def _sweep(client: MlflowClient, name: str, trials: list[dict[str, float] | None]) -> tuple[SweepState, list]:
    """A parent run and a closed trial run per entry: its cost metrics (None: a trial that reported none)."""
    experiment = ensure_experiment(client, name)
    parent = client.create_run(experiment, tags={names.ROLE: names.ROLE_PARENT}).info.run_id
    now = int(time.time() * 1000)
    for index, cost in enumerate(trials):
        run_id = records.create_trial_run(
            client,
            experiment,
            run_name=f"ce seed={index}",
            parent_run_id=parent,
            tags={names.SWEEP_ID: "s1", names.TRIAL_ID: f"t{index}"},
            params={"loss.name": "ce", "train.seed": index},
        )
        metrics = [Metric(names.best_metric("f1"), 0.5 + index / 100, now, 0)]
        metrics += [Metric(key, value, now, 10) for key, value in (cost or {}).items()]
        client.log_batch(run_id, metrics=metrics)
        ending = Event.COMPLETE if cost is not None else Event.FAIL
        TrialRun(client, run_id).send(ending, reason=None if cost is not None else "worker died")
    state = SweepState("s1", name, experiment, parent, client.tracking_uri, "digest", time.ctime())
    return state, records.trial_runs(client, experiment, "s1")


def _cost(cpu_s: float, wall_s: float, gpu_fraction: float) -> dict[str, float]:
    return {
        names.COST_CPU_SECONDS: cpu_s,
        names.COST_WALL_SECONDS: wall_s,
        names.COST_GPU_SECONDS: gpu_fraction * wall_s,
    }


def test_the_parent_run_sums_the_trials_cost_in_hours(client):
    # four packed trials (a quarter GPU each) of 1800 s, and one crashed before reporting anything
    state, runs = _sweep(client, "packed", [_cost(900.0, 1800.0, 0.25)] * 4 + [None])
    close_parent_run(client, state, runs, "f1", interrupted=False)
    parent = client.get_run(state.parent_run_id).data.metrics
    assert parent[COST_CPU_HOURS] == pytest.approx(4 * 900 / 3600)
    assert parent[COST_GPU_HOURS] == pytest.approx(4 * 0.25 * 1800 / 3600)  # 0.5 GPU-hours
    assert parent[COST_TRIALS] == 4  # the crashed trial reported no cost
    assert parent["trials_completed"] == 4 and parent["trials_failed"] == 1

    console = Console(file=io.StringIO(), width=200)
    print_closing(console, state, runs, {names.COMPLETED: 4, names.FAILED: 1}, "f1", client.tracking_uri)
    closing = console.file.getvalue()
    assert "cost:   1 CPU-hour, 0.5 GPU-hours (4 of 5 trials logged one)" in closing  # not the crashed one
    # the crashed trial (seed 4) logged the highest best_dev_f1 before it failed: not a result
    assert "best:   ce seed=3 · best_dev_f1 0.5300 · run " in closing and "(the best single trial)" in closing
    assert parent[names.best_metric("f1")] == pytest.approx(0.53)

    # the saved model names its trial: the winner (best mean over seeds) need not be the best single trial
    winner = next(run for run in runs if run.info.run_name.startswith("ce seed=1"))
    line = model_line(runs, winner.info.run_id, "models:/m-1", 2.34)
    assert line == "model:  ce seed=1 (the winner) · models:/m-1 (saved in 2.3 s)"
    assert model_line(runs, "gone", "models:/m-1", 2.0) == "model:  models:/m-1 (saved in 2.0 s)"
    kept = model_line(runs, "gone", "models:/m-1", 0.1, reused=True)  # a finished sweep resumed
    assert kept == "model:  models:/m-1 (saved before, kept)"


def test_cpu_trials_cost_cpu_hours_and_no_gpu_hours(client):
    state, runs = _sweep(client, "cpu", [_cost(120.0, 60.0, 0.0), _cost(240.0, 90.0, 0.0)])
    close_parent_run(client, state, runs, "f1", interrupted=False)
    parent = client.get_run(state.parent_run_id).data.metrics
    assert parent[COST_CPU_HOURS] == pytest.approx(360 / 3600)
    assert parent[COST_GPU_HOURS] == 0.0
    assert parent[COST_TRIALS] == 2
    console = Console(file=io.StringIO(), width=200)
    print_closing(console, state, runs, {names.COMPLETED: 2}, "f1", client.tracking_uri)
    assert "cost:   0.1 CPU-hours, 0 GPU-hours (2 trials)\n" in console.file.getvalue()  # every trial


def test_trials_without_cost_leave_the_parent_without_cost_metrics(client):
    state, runs = _sweep(client, "crashed", [None, None])
    close_parent_run(client, state, runs, "f1", interrupted=False)
    parent = client.get_run(state.parent_run_id).data.metrics
    assert not {COST_CPU_HOURS, COST_GPU_HOURS, COST_TRIALS} & set(parent)


def test_the_best_trial_is_a_usable_one(client):
    """A degenerate trial (one class predicted) is not the sweep's best, whatever its F1, as in analysis."""
    state, runs = _sweep(client, "degenerate-best", [_cost(60.0, 60.0, 0.0)] * 3)
    top = max(runs, key=lambda run: run.data.metrics[names.best_metric("f1")])
    client.set_tag(top.info.run_id, names.DEGENERATE, "predicts a single class (1) at its best evaluation")
    runs = records.trial_runs(client, state.experiment_id, "s1")
    assert best_run(runs, "f1").info.run_id != top.info.run_id
    assert best_run([run for run in runs if run.info.run_id == top.info.run_id], "f1") is None
