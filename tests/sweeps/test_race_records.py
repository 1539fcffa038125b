"""A seed race's record in MLflow, read back by the analysis: the race and the Decision agree on every
configuration the race dropped (a real SQLite store, the race driven by a synthetic score stream)."""

from __future__ import annotations

import json

import numpy as np
from mlflow import MlflowClient
from mlflow.entities import Metric, Param

from dicelab.analysis import AnalysisOptions, decisions, load_runs
from dicelab.sweeps.race_records import log_race
from dicelab.sweeps.racing import DROPPED, FINISHED, Race, RaceSettings
from dicelab.tracking import conventions as names
from dicelab.tracking.store import check_tracking, ensure_experiment

LOSSES = ["ce", "focal", "dsc"]
MEANS = {"ce": 0.790, "focal": 0.801, "dsc": 0.805}
SPREAD = {"ce": 0.002, "focal": 0.02, "dsc": 0.002}  # focal: a wide seed-to-seed spread


def score(index: int, seed: int) -> float:
    loss = LOSSES[index]
    shared = np.random.default_rng(seed).normal(0, 0.004)  # what a seed does to every loss (paired)
    return MEANS[loss] + shared + np.random.default_rng(100 * index + seed).normal(0, SPREAD[loss])


def test_a_configuration_the_race_dropped_is_worse_in_the_decision_as_in_the_race(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    check_tracking(uri)
    client = MlflowClient(uri)
    experiment = ensure_experiment(client, "raced")
    sweep = {names.SWEEP_NAME: "raced", names.SWEEP_ID: "s1"}
    parent = client.create_run(experiment, tags={names.ROLE: names.ROLE_PARENT, **sweep}).info.run_id

    race = Race(RaceSettings(min_seeds=3, max_seeds=8, test="t"), LOSSES)
    runs, counter = [], 0
    while (chosen := race.next_trial(f"t{counter}")) not in (None, FINISHED):
        index, seed = chosen
        trial_id, counter = f"t{counter}", counter + 1
        value = score(index, seed)
        tags = {names.ROLE: names.ROLE_TRIAL, names.TRIAL_ID: trial_id, names.OUTCOME: names.COMPLETED}
        tags |= {names.PRIMARY_METRIC: "f1", "mlflow.parentRunId": parent, **sweep}
        run = client.create_run(experiment, tags=tags)
        params = {"loss.name": LOSSES[index], "train.seed": seed, "task.name": "pair_classification"}
        client.log_batch(
            run.info.run_id,
            metrics=[Metric(names.best_metric("f1"), value, 0, 0)],
            params=[Param(key, str(value)) for key, value in params.items()],
        )
        client.set_terminated(run.info.run_id, "FINISHED")
        runs.append(client.get_run(run.info.run_id))
        race.record(trial_id, value)
    assert race.decision is not None and DROPPED in race.status  # the stream makes the race drop
    log_race(client, parent, race.state(), runs)

    dropped = {race.labels[i] for i, status in enumerate(race.status) if status == DROPPED}
    tagged = [run for run in client.search_runs([experiment]) if run.info.run_id != parent]
    for run in tagged:
        label = run.data.tags[names.RACE_CONFIGURATION]
        assert (names.RACE_ELIMINATION in run.data.tags) == (label in dropped)
        if label in dropped:
            evidence = json.loads(run.data.tags[names.RACE_ELIMINATION])
            assert evidence["p_holm"] < 0.05 and evidence["family"] >= 1

    found = decisions(load_runs("raced", uri), AnalysisOptions(test="t")).comparisons
    for label in dropped:
        rows = found[(found["candidate"] == label) | (found["reference"] == label)]
        race_rows = rows[rows["against"] == "race"]
        assert len(race_rows) == 1 and race_rows.iloc[0]["verdict"] == "worse"
        against_best = rows[rows["against"] == "best"]
        assert (against_best["verdict"] != "no detectable difference").all()
