"""The MLflow UI opens dicelab's experiments on their runs, and `dicelab ui` links to a sweep's runs."""

from __future__ import annotations

import json
import time

import pytest
from mlflow import MlflowClient

from dicelab.errors import TrackingError
from dicelab.tracking import check_tracking, ensure_experiment
from dicelab.tracking import conventions as names
from dicelab.tracking.links import (
    experiment_url,
    find_experiment,
    run_url,
    sweep_metric,
    swept_params,
    trials_view_url,
)


@pytest.fixture
def client(tmp_path) -> MlflowClient:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    check_tracking(uri)
    return MlflowClient(uri)


def _kind(client: MlflowClient, experiment_id: str) -> str | None:
    return client.get_experiment(experiment_id).tags.get(names.EXPERIMENT_KIND)


def test_a_new_experiment_opens_on_the_model_training_view(client):
    experiment_id = ensure_experiment(client, "fresh")
    # the value MLflow 3.17's UI maps to "Model training" (its runs table) rather than the GenAI overview
    assert _kind(client, experiment_id) == "custom_model_development"


def test_an_existing_untagged_experiment_is_tagged_and_a_chosen_kind_is_kept(client, tmp_path):
    untagged = client.create_experiment("older", artifact_location=(tmp_path / "older").as_uri())
    assert _kind(client, untagged) is None
    assert ensure_experiment(client, "older") == untagged
    assert _kind(client, untagged) == names.EXPERIMENT_KIND_TRAINING

    chosen = client.create_experiment(
        "chosen",
        artifact_location=(tmp_path / "chosen").as_uri(),
        tags={names.EXPERIMENT_KIND: "genai_development"},
    )
    ensure_experiment(client, "chosen")
    assert _kind(client, chosen) == "genai_development"


def test_experiment_url_sorts_by_the_best_metric_best_first():
    training = "workflowType=machine_learning"  # the UI's "Model training" side, whatever it showed last
    assert experiment_url("http://h:5000/", "7") == f"http://h:5000/#/experiments/7/runs?{training}"
    assert experiment_url("http://h:5000", "7", "f1") == (
        f"http://h:5000/#/experiments/7/runs?{training}&orderByKey=metrics.%60best_dev_f1%60&orderByAsc=false"
    )
    assert run_url("http://h:5000", "7", "abc") == f"http://h:5000/#/experiments/7/runs/abc?{training}"


def test_without_a_name_the_newest_sweep_is_found_with_its_metric(client):
    assert find_experiment(client, None) is None  # no sweep yet
    for name, metric in (("first", "f1"), ("second", "accuracy")):
        experiment_id = ensure_experiment(client, name)
        run = client.create_run(experiment_id, tags={names.ROLE: names.ROLE_PARENT})
        client.set_tag(run.info.run_id, names.PRIMARY_METRIC, metric)
        time.sleep(0.01)  # distinct start times
    client.create_run(ensure_experiment(client, "trial-only"))  # a standalone trial is not a sweep
    newest = find_experiment(client, None)
    assert newest is not None and newest.name == "second"
    assert sweep_metric(client, newest.experiment_id) == "accuracy"
    assert find_experiment(client, "first").name == "first"
    with pytest.raises(TrackingError, match=r"no experiment 'nope' .*available: .*first, second"):
        find_experiment(client, "nope")


def test_the_trials_view_filters_out_parents_sorts_and_shows_the_swept_params(client):
    experiment_id = ensure_experiment(client, "swept")
    parent = client.create_run(
        experiment_id, tags={names.ROLE: names.ROLE_PARENT, names.SWEEP_ID: "s1", names.PRIMARY_METRIC: "f1"}
    )
    for loss, seed in (("ce", 1), ("ce", 2), ("dice", 1)):
        tags = {names.ROLE: names.ROLE_TRIAL, names.SWEEP_ID: "s1", "mlflow.parentRunId": parent.info.run_id}
        run = client.create_run(experiment_id, tags=tags)
        for key, value in (("loss.name", loss), ("train.seed", seed), ("train.epochs", 3)):
            client.log_param(run.info.run_id, key, value)
    params = swept_params(client, experiment_id)
    assert params == ["loss.name", "train.seed"]  # train.epochs is the same in every trial

    url = trials_view_url(client, "http://h:5000/", experiment_id, "f1", params)
    assert url == (
        f"http://h:5000/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
        "&viewStateShareKey=dicelab-trials"
    )
    state = json.loads(client.get_experiment(experiment_id).tags["mlflow.sharedViewState.dicelab-trials"])
    assert state["searchFilter"] == "tags.`dicelab.role` = 'trial'"
    assert state["orderByKey"] == "metrics.`best_dev_f1`" and state["orderByAsc"] is False
    columns = ["metrics.`best_dev_f1`", "params.`loss.name`", "params.`train.seed`"]
    assert state["selectedColumns"][1:] == columns
    # the filter is one MLflow accepts, and it keeps the trials only
    found = client.search_runs([experiment_id], filter_string=state["searchFilter"])
    assert len(found) == 3 and parent.info.run_id not in {run.info.run_id for run in found}
