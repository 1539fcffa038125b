"""A small seed race on a real two-node Ray cluster with an MLflow server: the driver is killed mid-race and
resumed; the race continues where it was, with no trial run twice and no run duplicated, and its decision and
eliminations are recorded on the parent run."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from mlflow import MlflowClient

from dicelab.sweeps.race_records import DECISION_ARTIFACT, ELIMINATIONS_ARTIFACT
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def test_a_race_killed_mid_way_resumes_the_same_race(tmp_path, ray_cluster, mlflow_server, sweep_tools):
    config = sweep_tools.write_sweep(
        tmp_path,
        "it-race",
        {
            # a learning rate that learns against one that cannot: the race has something to find
            "space": {"train.learning_rate": {"grid": [1.0e-3, 1.0e-9]}},
            "racing": {"min_seeds": 2, "max_seeds": 3},
            "max_concurrent": 1,
        },
    )
    args = ["sweep", str(config), "--address", ray_cluster.address, "--tracking-uri", mlflow_server]
    driver = sweep_tools.start(args, tmp_path)
    try:
        sweep_tools.wait_until(
            lambda: len(_finished(sweep_tools, mlflow_server)) >= 2, 400, "two finished trials", driver
        )
        driver.kill()
    finally:
        driver.stop()
    finished_before = {run.info.run_id: run.info.end_time for run in _finished(sweep_tools, mlflow_server)}

    resumed = sweep_tools.run([*args, "--resume"], tmp_path, timeout_s=600)
    _, after = sweep_tools.sweep_runs(mlflow_server, "it-race")
    listing = "\n".join(
        f"{run.info.run_id} {run.info.status} {run.data.tags.get(names.TRIAL_ID)} {run.data.params}"
        for run in after
    )
    assert resumed.returncode == 0, f"{resumed.stdout}{resumed.stderr}\n{listing}"
    assert "race:" in resumed.stdout

    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-race")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    runs = sweep_tools.by_trial(parents[0], trials)  # one run per trial
    pairs = Counter((run.data.params["train.learning_rate"], run.data.params["train.seed"]) for run in trials)
    assert set(pairs.values()) == {1}, f"a configuration ran twice on one seed: {pairs}"
    assert {seed for _, seed in pairs} <= {"1", "2", "3"}
    for lr in ("0.001", "1e-09"):  # both started on min_seeds seeds
        assert {seed for rate, seed in pairs if rate == lr} >= {"1", "2"}
    for run in trials:
        if run.info.run_id in finished_before:  # finished trials were not run again
            assert run.info.end_time == finished_before[run.info.run_id]

    client = MlflowClient(mlflow_server)
    parent = client.get_run(parents[0].info.run_id)
    assert parent.data.tags[names.RACE_DECISION]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "race")}
    assert {ELIMINATIONS_ARTIFACT, DECISION_ARTIFACT} <= artifacts
    local = client.download_artifacts(parent.info.run_id, DECISION_ARTIFACT, str(tmp_path))
    with open(local, encoding="utf-8") as handle:
        decision = json.load(handle)["decision"]
    assert decision["trials"] == len(runs) and decision["reason"] in ("separated", "equivalent", "budget")
    statuses = {run.data.tags.get(names.RACE_STATUS) for run in trials}
    assert statuses <= {"dropped", "winner", "undecided"} and None not in statuses


def _finished(tools, uri: str):
    _, trials = tools.sweep_runs(uri, "it-race")
    return [run for run in trials if run.info.status == "FINISHED"]
