"""New SQLite stores start as copies of MLflow's empty schema, built once per MLflow version in the user's
cache: the same store MLflow would have made, without its migrations; an existing store is never replaced,
and a cache that cannot be written leaves the store to MLflow's own creation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mlflow import MlflowClient

from dicelab.tracking import sqlite_template
from dicelab.tracking.store import check_tracking


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One cache for the module: building the template runs MLflow's migrations (seconds)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def in_cache(cache, monkeypatch) -> Path:
    monkeypatch.setenv(sqlite_template.CACHE_ENV, str(cache))
    return cache


def _rows(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as connection:
        return connection.execute(sql).fetchall()


def _schema(path: Path) -> list[tuple]:
    """Each table's and index's definition as a set of lines: MLflow's migrations write a table's
    constraints in an order that varies from process to process."""
    rows = _rows(path, "SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
    return [
        (kind, name, sorted(line.strip().rstrip(",") for line in (sql or "").splitlines()))
        for kind, name, sql in rows
    ]


def test_a_new_store_is_a_copy_of_the_template_and_works(in_cache, tmp_path):
    store = tmp_path / "project" / ".dicelab" / "mlflow.db"
    check_tracking(f"sqlite:///{store}")
    template = sqlite_template.template_path()
    assert template.parent == in_cache / "dicelab" and template.is_file()
    assert not _rows(template, "SELECT * FROM experiments")  # no Default experiment in the template
    assert not [path for path in store.parent.iterdir() if path.name != "mlflow.db"]  # no partial copy left

    client = MlflowClient(f"sqlite:///{store}")
    assert client.get_experiment("0").name == "Default"  # made by MLflow when it opened the copy
    run = client.create_run(client.create_experiment("x", artifact_location=str(tmp_path / "a"))).info
    client.log_metric(run.run_id, "dev_f1", 0.5)
    assert client.get_run(run.run_id).data.metrics == {"dev_f1": 0.5}


def test_the_template_is_the_schema_mlflow_creates(in_cache, tmp_path):
    fresh = tmp_path / "fresh.db"
    MlflowClient(f"sqlite:///{fresh}").search_experiments()  # MLflow's own creation, migrations and all
    copied = tmp_path / "copied.db"
    assert sqlite_template.start_from_template(copied)
    assert _schema(copied) == _schema(fresh)
    version = "SELECT version_num FROM alembic_version"
    assert _rows(copied, version) == _rows(fresh, version)


def test_an_existing_store_is_never_replaced(in_cache, tmp_path):
    store = tmp_path / "mlflow.db"
    store.write_bytes(b"a store")
    assert not sqlite_template.start_from_template(store)
    assert store.read_bytes() == b"a store"


def test_a_store_made_by_another_process_meanwhile_is_kept(in_cache, tmp_path, monkeypatch):
    store = tmp_path / "mlflow.db"
    copy = sqlite_template.shutil.copyfile

    def copy_while_another_process_creates_it(source, target):
        store.write_bytes(b"another process's store")
        return copy(source, target)

    monkeypatch.setattr(sqlite_template.shutil, "copyfile", copy_while_another_process_creates_it)
    assert not sqlite_template.start_from_template(store)
    assert store.read_bytes() == b"another process's store"
    assert [path.name for path in tmp_path.iterdir()] == ["mlflow.db"]


def test_an_unwritable_cache_leaves_the_store_to_mlflow(tmp_path, monkeypatch):
    not_a_directory = tmp_path / "cache"
    not_a_directory.write_text("")
    monkeypatch.setenv(sqlite_template.CACHE_ENV, str(not_a_directory))
    store = tmp_path / "s" / "mlflow.db"
    store.parent.mkdir()
    assert not sqlite_template.start_from_template(store)
    assert not store.exists()
    check_tracking(f"sqlite:///{store}")  # MLflow creates the schema itself
    assert MlflowClient(f"sqlite:///{store}").get_experiment("0").name == "Default"
