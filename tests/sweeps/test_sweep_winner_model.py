"""The sweep's model (`dicelab.sweeps.winner_model`) in a real SQLite MLflow store, without Ray: a winner
whose run already holds its model (a finished sweep resumed) keeps that model, is not logged again, and is
registered once however often the sweep is resumed with --register."""

from __future__ import annotations

from mlflow import MlflowClient
from mlflow.entities import LoggedModelStatus

from dicelab.experiment import experiment_from_dict
from dicelab.models.publishing import MODEL_TAG
from dicelab.sweeps import records
from dicelab.sweeps.space import plan_sweep
from dicelab.sweeps.winner_model import WINNER_MODEL, SweepRuns, keep_models
from dicelab.tracking import check_tracking
from dicelab.tracking import conventions as names


def _plan():
    data = {"name": "kept", "data": {"source": "synthetic_pairs"}, "search": {"seeds": [1, 2]}}
    return plan_sweep(experiment_from_dict(data, "kept.yaml"), "kept.yaml")


def _sweep(client: MlflowClient, store: str) -> tuple[SweepRuns, dict[str, str]]:
    """A finished sweep of two seeds; returns where it is and trial id -> run id."""
    experiment_id = client.create_experiment("kept")
    parent = client.create_run(experiment_id, tags={names.ROLE: names.ROLE_PARENT, names.SWEEP_ID: "s1"})
    run_ids = {}
    for trial_id, seed, best in (("t1", 1, 0.61), ("t2", 2, 0.66)):
        tags = {names.SWEEP_NAME: "kept", names.SWEEP_ID: "s1", names.TRIAL_ID: trial_id}
        run_id = records.create_trial_run(
            client, experiment_id, run_name=f"ce seed={seed}", parent_run_id=parent.info.run_id,
            tags=tags, params={"loss.name": "ce", "train.seed": seed},
        )  # fmt: skip
        client.log_metric(run_id, names.best_metric("f1"), best)
        client.set_tag(run_id, names.OUTCOME, names.COMPLETED)
        client.set_terminated(run_id, "FINISHED")
        run_ids[trial_id] = run_id
    return SweepRuns(store, experiment_id, "s1", parent.info.run_id, "f1"), run_ids


def _logged_model(client: MlflowClient, run_id: str, status: LoggedModelStatus) -> str:
    """A model on the run as `log_model` leaves it (the model's files do not matter here)."""
    run = client.get_run(run_id)
    logged = client.create_logged_model(run.info.experiment_id, name="model", source_run_id=run_id)
    client.finalize_logged_model(logged.model_id, status)
    uri = f"models:/{logged.model_id}"
    client.set_tag(run_id, MODEL_TAG, uri)
    return uri


def test_a_resumed_sweeps_winner_keeps_its_model_and_is_registered_once(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    check_tracking(store)  # a copy of the cached empty schema, not MLflow's migrations
    client = MlflowClient(store)
    sweep, run_ids = _sweep(client, store)
    uri = _logged_model(client, run_ids["t2"], LoggedModelStatus.READY)
    for _ in range(2):  # no Tune results: logging a model would fail with "its trial has no checkpoint"
        kept = keep_models(client, _plan(), sweep, grid=[], inputs={}, register="kept-winner")
        assert (kept.winner_run_id, kept.winner_model_uri, kept.reused) == (run_ids["t2"], uri, True)
        assert kept.warnings == []
    assert client.get_run(sweep.parent_run_id).data.tags[WINNER_MODEL] == uri
    versions = client.search_model_versions("name = 'kept-winner'")
    assert [(str(version.version), version.source) for version in versions] == [("1", uri)]


def test_a_model_that_never_became_ready_is_not_kept(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    check_tracking(store)  # a copy of the cached empty schema, not MLflow's migrations
    client = MlflowClient(store)
    sweep, run_ids = _sweep(client, store)
    _logged_model(client, run_ids["t2"], LoggedModelStatus.FAILED)
    kept = keep_models(client, _plan(), sweep, grid=[], inputs={})
    assert kept.winner_model_uri is None and not kept.reused
    assert kept.warnings == ["trial ce seed=2: no model saved: its trial has no checkpoint"]  # logging tried
