"""A sweep's MLflow runs on a real SQLite store: one child per trial found by tags, closed with its outcome,
and best metrics recovered from the history of a run stopped from outside (ASHA)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric, Param
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from dicelab.config import flatten_config
from dicelab.experiment import load_experiment
from dicelab.sweeps import records
from dicelab.sweeps.parent_run import start_or_resume
from dicelab.sweeps.space import plan_sweep
from dicelab.sweeps.state import SweepState
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import Event, TrialRun
from dicelab.tracking.store import check_tracking, ensure_experiment

ROOT = Path(__file__).parents[2]


@pytest.fixture
def client(tmp_path) -> MlflowClient:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    check_tracking(uri)  # the store as dicelab makes it
    return MlflowClient(uri)


def test_trial_runs_are_found_by_sweep_and_trial_id_and_closed_with_their_outcome(client):
    experiment = ensure_experiment(client, "records")
    parent = client.create_run(experiment, tags={names.ROLE: names.ROLE_PARENT}).info.run_id
    run_ids = {}
    for trial in ("t1", "t2"):
        run_ids[trial] = records.create_trial_run(
            client,
            experiment,
            run_name=f"trial {trial}",
            parent_run_id=parent,
            tags={names.SWEEP_ID: "s1", names.TRIAL_ID: trial},
            params={f"p{index}": index for index in range(150)},  # more than one MLflow batch
        )
    assert records.find_trial_run(client, experiment, "s1", "t2").info.run_id == run_ids["t2"]
    assert records.find_trial_run(client, experiment, "s1", "t3") is None
    assert records.find_trial_run(client, experiment, "s2", "t1") is None

    run = client.get_run(run_ids["t1"])
    assert run.info.status == records.RUNNING
    assert run.data.tags[MLFLOW_PARENT_RUN_ID] == parent and run.data.tags[names.ROLE] == names.ROLE_TRIAL
    assert len(run.data.params) == 150

    TrialRun(client, run_ids["t1"]).send(Event.NON_FINITE, reason="non-finite loss (nan) at step 3")
    TrialRun(client, run_ids["t2"]).send(Event.STOP_EARLY, reason="x" * 9000)
    one, two = client.get_run(run_ids["t1"]), client.get_run(run_ids["t2"])
    assert (one.info.status, one.data.tags[names.OUTCOME]) == ("FAILED", names.NON_FINITE)
    assert (two.info.status, two.data.tags[names.OUTCOME]) == ("FINISHED", names.EARLY_STOPPED)
    assert len(two.data.tags[names.REASON]) <= 8000
    assert {r.info.run_id for r in records.trial_runs(client, experiment, "s1")} == set(run_ids.values())


def test_best_metrics_of_a_stopped_run_come_from_its_history(client):
    experiment = ensure_experiment(client, "records-best")
    run_id = client.create_run(experiment).info.run_id
    now = int(time.time() * 1000)
    history = {10: (0.4, 0.7), 20: (0.6, 0.5), 30: (0.5, 0.9)}  # step: (dev_f1, dev_recall)
    client.log_batch(
        run_id,
        metrics=[
            Metric(key, value, now, step)
            for step, (f1, recall) in history.items()
            for key, value in (("dev_f1", f1), ("dev_recall", recall), ("train_loss", 1.0))
        ],
    )
    records.log_best_from_history(client, client.get_run(run_id), "f1")
    metrics = client.get_run(run_id).data.metrics
    assert metrics["best_dev_f1"] == 0.6 and metrics["best_dev_recall"] == 0.5 and metrics["best_step"] == 20
    assert "best_train_loss" not in metrics


def test_a_minimised_metrics_best_of_a_stopped_run_is_its_lowest(client):
    experiment = ensure_experiment(client, "records-lowest")
    run_id = client.create_run(experiment).info.run_id
    now = int(time.time() * 1000)
    history = {10: 0.62, 20: 0.48, 30: 0.55}  # dev_log_loss
    client.log_batch(
        run_id,
        metrics=[Metric("dev_log_loss", value, now, step) for step, value in history.items()],
        params=[Param("train.mode", "min")],
    )
    records.log_best_from_history(client, client.get_run(run_id), "log_loss")
    metrics = client.get_run(run_id).data.metrics
    assert metrics["best_dev_log_loss"] == 0.48 and metrics["best_step"] == 20


def test_quickstart_is_a_seed_race_of_three_losses():
    config = load_experiment(ROOT / "experiments" / "quickstart.yaml")
    plan = plan_sweep(config, "quickstart.yaml")
    points = [plan.trial_data(point)[1] for point in plan.points()]
    assert plan.num_configurations == 3 and plan.racing is not None
    assert (plan.racing.min_seeds, plan.racing.max_seeds) == (3, 12)
    assert plan.num_trials == 3 * 12  # the most the race can run; its time budget ends it sooner
    assert plan.search.time_budget_s == 150
    assert {p["loss.name"] for p in points} == {"ce", "focal", "dice"}
    assert all("train.seed" not in p for p in points)  # the race gives the seeds
    assert [p["loss.level"] for p in points if p["loss.name"] == "dice"] == ["batch"]
    assert config.data.source == "synthetic_pairs" and config.model.backbone == "tiny-bert"


def test_a_resume_deletes_the_trial_runs_whose_config_was_cut_short(client):
    experiment = ensure_experiment(client, "records")
    parent = client.create_run(experiment, tags={names.ROLE: names.ROLE_PARENT}).info.run_id
    # two MLflow batches, the second ending on the last section's keys
    params = {f"{'a' if index < 140 else 'z'}.p{index:03d}": index for index in range(150)}
    whole = records.create_trial_run(
        client,
        experiment,
        run_name="whole",
        parent_run_id=parent,
        tags={names.SWEEP_ID: "s1", names.TRIAL_ID: "t1"},
        params=params,
    )
    # What a driver killed inside create_trial_run leaves: a run with no params, or with its first batch only.
    cut = []
    for trial, logged in (("t2", {}), ("t3", dict(list(params.items())[:100]))):
        run_id = client.create_run(
            experiment,
            tags={names.SWEEP_ID: "s1", names.TRIAL_ID: trial, names.ROLE: names.ROLE_TRIAL},
        ).info.run_id
        records.log_params(client, run_id, logged)
        cut.append(run_id)

    older = records.create_trial_run(  # a whole run whose last section ends on another key
        client,
        experiment,
        run_name="older",
        parent_run_id=parent,
        tags={names.SWEEP_ID: "s1", names.TRIAL_ID: "t4"},
        params={key: value for key, value in params.items() if key != "z.p149"},
    )

    deleted = records.discard_cut_short(client, experiment, "s1", last_section="z")

    assert deleted == 2
    assert {run.info.run_id for run in records.trial_runs(client, experiment, "s1")} == {whole, older}
    assert all(client.get_run(run_id).info.lifecycle_stage == "deleted" for run_id in cut)
    assert records.find_trial_run(client, experiment, "s1", "t2") is None  # its trial creates the run again


def test_resuming_a_sweep_deletes_a_run_left_without_its_config(client, tmp_path):
    config = load_experiment(ROOT / "experiments" / "quickstart.yaml")
    plan = plan_sweep(config, "quickstart.yaml")
    experiment = ensure_experiment(client, "quickstart")
    parent = client.create_run(experiment, tags={names.ROLE: names.ROLE_PARENT}).info.run_id
    tags = {names.SWEEP_ID: "s1", names.ROLE: names.ROLE_TRIAL}
    kept = records.create_trial_run(
        client,
        experiment,
        run_name="kept",
        parent_run_id=parent,
        tags={**tags, names.TRIAL_ID: "t1"},
        params=flatten_config(config),
    )
    client.create_run(experiment, tags={**tags, names.TRIAL_ID: "t2"})  # killed before its params
    state = SweepState("s1", "quickstart", experiment, parent, "sqlite://", "digest", "now")

    start_or_resume(client, config, plan, tmp_path, "", "sqlite://", (state, tmp_path))

    assert [run.info.run_id for run in records.trial_runs(client, experiment, "s1")] == [kept]
    assert client.get_run(parent).info.status == records.RUNNING
