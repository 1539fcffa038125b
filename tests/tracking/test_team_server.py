"""dicelab against a team's server (PostgreSQL + `mlflow server` with basic auth, tests/tracking/conftest.py):
a sweep, its analysis over HTTP and over the database URI, the UI link, the report through the artifact
proxy; a wrong password is one line before Ray starts; no password reaches any output; metric histories read
over HTTP equal those read with SQL. One file, so the tests share one server even on several xdist workers
(`--dist loadfile`)."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient
from mlflow.entities import Metric

from dicelab.analysis import _run_tables
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

EXPERIMENT = "team-tiny"


def _config(directory: Path) -> Path:
    path = directory / "tiny.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": EXPERIMENT,
                "data": {
                    "source": "synthetic_pairs",
                    "synthetic": {"n_train": 32, "n_dev": 16},
                    "max_length": 32,
                },
                "model": {"backbone": "tiny-bert"},
                "train": {"epochs": 1, "batch_size": 16},
                "tracking": {"log_predictions": False},
                "search": {
                    "seeds": [1],
                    "space": {"loss.name": {"grid": ["ce", "dice"]}},
                    "resources": {"cpu": 1},
                    "max_concurrent": 1,  # one trial worker (a process importing torch) for both trials
                },
            }
        )
    )
    return path


def _dicelab(
    args: list[str], cwd: Path, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dicelab.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


@pytest.fixture(scope="module")
def swept(team_server_under_test, tmp_path_factory):
    """One sweep into the server, then `dicelab analyze` over HTTP: (directory, outputs of both)."""
    directory = tmp_path_factory.mktemp("team")
    env = team_server_under_test.env()
    uri = team_server_under_test.uri
    sweep = _dicelab(["sweep", str(_config(directory)), "--tracking-uri", uri], directory, env, 420)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    analyze = _dicelab(["analyze", "--experiment", EXPERIMENT, "--tracking-uri", uri], directory, env, 240)
    assert analyze.returncode == 0, analyze.stderr[-3000:]
    return directory, [sweep, analyze]


def test_sweep_and_analysis_over_http_with_login(team_server_under_test, swept):
    server = team_server_under_test
    client = MlflowClient(server.uri)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_USERNAME", server.username)
        patch.setenv("MLFLOW_TRACKING_PASSWORD", server.password)
        experiment = client.get_experiment_by_name(EXPERIMENT)
        runs = client.search_runs([experiment.experiment_id])
        parents = [run for run in runs if run.data.tags.get(names.ROLE) == names.ROLE_PARENT]
        trials = [run for run in runs if run.data.tags.get(names.ROLE) == names.ROLE_TRIAL]
        assert len(parents) == 1 and len(trials) == 2
        assert all(run.info.status == "FINISHED" for run in trials)
        # The report went through the artifact proxy (mlflow-artifacts:/), into the server's directory.
        assert experiment.artifact_location.startswith("mlflow-artifacts:")
        report = [item.path for item in client.list_artifacts(parents[0].info.run_id, names.REPORT_DIR)]
        assert report, "no report on the parent run"
    stored = list(server.server.artifacts.rglob("*"))
    assert any(names.REPORT_DIR in path.parts for path in stored), stored[:20]


def test_analysis_with_the_database_uri_reads_the_same_trials(team_server_under_test, swept):
    directory, _ = swept
    server = team_server_under_test
    # The password comes from libpq's PGPASSFILE (in env()), never from the URI.
    out = directory / "db-report"
    args = ["analyze", "--experiment", EXPERIMENT, "--tracking-uri", server.server.database_uri]
    done = _dicelab([*args, "--out", str(out), "--no-log"], directory, server.env(), 240)
    assert done.returncode == 0, done.stderr[-3000:]
    http_report = directory / ".dicelab" / "reports" / EXPERIMENT
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in http_report.iterdir())


def test_ui_links_to_the_sweep_on_the_server(team_server_under_test, swept):
    directory, outputs = swept
    server = team_server_under_test
    done = _dicelab(
        ["ui", "--experiment", EXPERIMENT, "--tracking-uri", server.uri], directory, server.env(), 120
    )
    outputs.append(done)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"sweep {EXPERIMENT!r}: {server.uri}/#/experiments/" in done.stdout


@pytest.mark.parametrize("command", ["sweep", "analyze"])
def test_a_wrong_password_is_one_line_before_ray_starts(team_server_under_test, tmp_path, command):
    server = team_server_under_test
    args = {
        "sweep": ["sweep", str(_config(tmp_path))],
        "analyze": ["analyze", "--experiment", EXPERIMENT],
    }[command]
    started = time.monotonic()
    wrong = "not-" + server.password
    done = _dicelab(
        [*args, "--tracking-uri", server.uri], tmp_path, server.env(MLFLOW_TRACKING_PASSWORD=wrong), 120
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0] == (
        f"dicelab {command}: error: MLflow server {server.uri} refused the login (HTTP 401): set "
        "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or ~/.mlflow/credentials) to an account of "
        "that server"
    )
    assert wrong not in done.stdout + done.stderr
    assert time.monotonic() - started < 60
    assert not (tmp_path / ".dicelab").exists()  # nothing started, nothing written


def test_no_password_in_any_output(team_server_under_test, swept):
    """Every output of the sweep, analysis and UI (console, report files, run params and tags, the server's
    logs, artifacts and database files) is free of the MLflow password and PostgreSQL's password."""
    directory, outputs = swept
    server = team_server_under_test
    pg_password = server.server.pgpass.read_text().strip().rsplit(":", 1)[1]
    secrets = [server.password.encode(), pg_password.encode()]
    for done in outputs:
        for secret in secrets:
            assert secret.decode() not in done.stdout + done.stderr, done.args
    files = [p for p in [*directory.rglob("*"), *server.server.directory.rglob("*")] if p.is_file()]
    files = [p for p in files if p != server.server.pgpass]
    assert len(files) > 20
    for path in files:
        content = path.read_bytes()
        for secret in secrets:
            assert secret not in content, path
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_USERNAME", server.username)
        patch.setenv("MLFLOW_TRACKING_PASSWORD", server.password)
        client = MlflowClient(server.uri)
        experiment = client.get_experiment_by_name(EXPERIMENT)
        for run in client.search_runs([experiment.experiment_id]):
            recorded = str(run.data.params) + str(run.data.tags)
            assert server.password not in recorded and pg_password not in recorded


def test_histories_over_http_equal_the_database_s(team_server_under_test, monkeypatch):
    """Metric histories read from the server over HTTP (the REST API's get-history-bulk-interval, several runs
    a request) equal those read from its PostgreSQL database with SQL: values, steps, NaN, infinity."""
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
