"""Metric histories read from the team server over HTTP (the REST API's get-history-bulk-interval, several
runs a request) equal those read from its PostgreSQL database with SQL: values, steps, NaN, infinity."""

from __future__ import annotations

import math
import sys
import time

import pandas as pd
import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric

from dicelab.analysis import _run_tables

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_histories_over_http_equal_the_database_s(team_server_under_test, monkeypatch):
    for key, value in team_server_under_test.env().items():
        monkeypatch.setenv(key, value)
    client = MlflowClient(team_server_under_test.uri)
    experiment_id = client.create_experiment(f"histories-{time.time_ns()}")
    values = [[0.5, 0.6, 0.7], [math.nan, 0.2, math.inf], [0.9], []]
    run_ids = []
    for history in values:
        run_id = client.create_run(experiment_id).info.run_id
        now = int(time.time() * 1000)
        metrics = [Metric("dev_f1", value, now + step, step) for step, value in enumerate(history, 1)]
        client.log_batch(run_id, metrics=[*metrics, Metric("dev_loss", 1.0, now, 1)])
        run_ids.append(run_id)
    monkeypatch.setattr(_run_tables, "_RUN_IDS_PER_REQUEST", 3)  # two requests for the four runs

    over_http = _run_tables.read_histories(client, run_ids, "dev_f1")
    database = MlflowClient(team_server_under_test.server.database_uri)
    from_sql = _run_tables.read_histories(database, run_ids, "dev_f1")

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(["run_id", "step"], ignore_index=True)

    pd.testing.assert_frame_equal(ordered(over_http), ordered(from_sql), check_dtype=False)
    assert len(over_http) == 7 and over_http["value"].isna().sum() == 1
    assert (
        over_http["value"].max() == sys.float_info.max
    )  # MLflow's SQL store keeps infinity as the largest float
