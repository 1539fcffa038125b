"""The SQL tables' contract: every column dicelab declares for MLflow's tracking tables is one MLflow's own
models have, with the same type (a failure names the column), the tables read back what MLflow's client
wrote, and importing the module leaves MLflow unimported."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sqlalchemy as sa
from mlflow import MlflowClient
from mlflow.store.db.db_types import DATABASE_ENGINES
from mlflow.store.tracking.dbmodels import models

from dicelab.tracking import sql_tables
from dicelab.tracking.store import check_tracking

MLFLOW_MODELS = {
    "experiments": models.SqlExperiment,
    "runs": models.SqlRun,
    "tags": models.SqlTag,
    "params": models.SqlParam,
    "metrics": models.SqlMetric,
    "latest_metrics": models.SqlLatestMetric,
}


@pytest.mark.parametrize("name", sorted(sql_tables.TABLES))
def test_every_declared_column_is_mlflows(name):
    theirs = MLFLOW_MODELS[name].__table__
    assert theirs.name == name
    for column in sql_tables.TABLES[name].columns:
        assert column.name in theirs.c, f"MLflow's {name} table has no column {column.name} any more"
        their_type = theirs.c[column.name].type
        assert column.type.python_type is their_type.python_type, f"{name}.{column.name} is {their_type} now"


def test_the_engines_and_lifecycle_are_mlflows():
    from mlflow.entities import LifecycleStage

    assert sorted(sql_tables.DATABASE_ENGINES) == sorted(DATABASE_ENGINES)
    assert sql_tables.ACTIVE == LifecycleStage.ACTIVE


def test_every_mlflow_store_has_the_migrations_table(tmp_path):
    import sqlalchemy as sa
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(uri).search_experiments()
    engine = sa.create_engine(uri)
    try:
        assert sa.inspect(engine).has_table(sql_tables.MIGRATIONS)
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("uri", "database"),
    [
        ("sqlite:///tmp/mlflow.db", True),
        ("postgresql://u@127.0.0.1/mlflow", True),
        ("postgresql+psycopg://u@127.0.0.1/mlflow", True),
        ("mysql+pymysql://u@host/mlflow", True),
        ("http://127.0.0.1:5000", False),
        ("https://mlflow.example.com", False),
        ("file:///tmp/mlruns", False),
        ("databricks", False),
    ],
)
def test_is_database_uri(uri, database):
    assert sql_tables.is_database_uri(uri) is database


def test_the_tables_read_what_the_client_wrote(tmp_path):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    check_tracking(uri)
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("tables")
    run = client.create_run(experiment_id, tags={"role": "trial"})
    client.log_param(run.info.run_id, "loss", "dice")
    client.log_metric(run.info.run_id, "dev_f1", 0.5, step=1)
    client.log_metric(run.info.run_id, "dev_f1", 0.75, step=2)
    client.set_terminated(run.info.run_id)
    engine = sa.create_engine(uri)
    try:
        with engine.connect() as connection:

            def rows(name: str, *columns: str) -> set[tuple]:
                table = sql_tables.TABLES[name]
                query = sa.select(*(table.c[column] for column in columns)).where(
                    table.c.run_uuid == run.info.run_id
                )
                return set(connection.execute(query).all())

            experiment = sql_tables.EXPERIMENTS
            found = connection.execute(
                sa.select(experiment.c.experiment_id, experiment.c.lifecycle_stage).where(
                    experiment.c.name == "tables"
                )
            ).all()
            assert found == [(int(experiment_id), sql_tables.ACTIVE)]
            info = client.get_run(run.info.run_id).info
            assert rows("runs", "run_uuid", "name", "status", "start_time", "end_time", "artifact_uri") == {
                (info.run_id, info.run_name, "FINISHED", info.start_time, info.end_time, info.artifact_uri)
            }
            assert ("role", "trial") in rows("tags", "key", "value")
            assert rows("params", "key", "value") == {("loss", "dice")}
            assert rows("metrics", "key", "step", "value", "is_nan") == {
                ("dev_f1", 1, 0.5, False),
                ("dev_f1", 2, 0.75, False),
            }
            assert rows("latest_metrics", "key", "value") == {("dev_f1", 0.75)}
    finally:
        engine.dispose()


def test_importing_it_leaves_mlflow_unimported():
    code = "import sys, dicelab.tracking.sql_tables; print('mlflow' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    )
