"""Resolving, checking and preparing the MLflow store."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mlflow import MlflowClient

from dicelab.config import parse_config
from dicelab.errors import TrackingError
from dicelab.tracking import (
    artifact_location,
    check_tracking,
    default_tracking_uri,
    ensure_experiment,
    resolve_tracking_uri,
)


@pytest.fixture(scope="module")
def sqlite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'nested' / 'mlflow.db'}"
    check_tracking(uri)  # creates the directory and the schema
    return uri


def test_default_store_is_an_absolute_sqlite_file_under_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_tracking_uri() == f"sqlite:///{tmp_path.resolve()}/.dicelab/mlflow.db"
    assert default_tracking_uri(tmp_path / "x").startswith("sqlite:////")


def test_uri_precedence_is_flag_then_config_then_environment_then_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    configured = parse_config({"name": "x", "tracking": {"uri": "http://config:5000"}})
    unconfigured = parse_config({"name": "x"})
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:5000")
    assert resolve_tracking_uri("http://flag:5000", configured) == "http://flag:5000"
    assert resolve_tracking_uri(None, configured) == "http://config:5000"
    assert resolve_tracking_uri(None, unconfigured) == "http://env:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert resolve_tracking_uri(None, unconfigured) == default_tracking_uri(tmp_path)
    # a relative SQLite path is pinned to the working directory (Ray workers run elsewhere)
    assert resolve_tracking_uri("sqlite:///runs/m.db") == f"sqlite:///{tmp_path.resolve()}/runs/m.db"


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("/some/dir/mlruns", "file store, which MLflow 3 deprecates"),
        ("mlruns", "file store"),
        ("file:///tmp/mlruns", "file store"),
        ("ftp://host/x", "unsupported scheme 'ftp'"),
        ("sqlite:///", "expected sqlite:///PATH"),
    ],
)
def test_unusable_uris_are_rejected_with_a_hint(uri, message):
    with pytest.raises(TrackingError, match=message):
        check_tracking(uri)


def test_sqlite_store_in_a_path_that_cannot_be_a_directory(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(TrackingError, match="cannot create"):
        check_tracking(f"sqlite:///{tmp_path}/file/mlflow.db")


def test_sqlite_store_in_a_read_only_directory(tmp_path):
    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o555)
    probe = read_only / "probe"
    try:
        probe.touch()  # root ignores permissions: nothing to test then
        pytest.skip("running as a user who can write anywhere")
    except PermissionError:
        pass
    with pytest.raises(TrackingError, match="not writable"):
        check_tracking(f"sqlite:///{read_only}/mlflow.db")


def test_a_server_that_is_down_fails_within_seconds():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(TrackingError, match=f"MLflow server http://127.0.0.1:{port} is unreachable"):
        check_tracking(f"http://127.0.0.1:{port}")
    assert time.monotonic() - started < 6


def test_a_server_that_is_not_mlflow_is_rejected():
    # Something listening that answers /health with an error: a plain socket server closing at once.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with ThreadPoolExecutor(1) as pool:

            def answer() -> None:
                connection, _ = server.accept()
                with connection:
                    connection.recv(4096)
                    connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

            pool.submit(answer)
            with pytest.raises(TrackingError, match="HTTP 404"):
                check_tracking(f"http://127.0.0.1:{port}")


def test_experiments_are_created_once_with_artifacts_beside_the_database(sqlite_uri):
    client = MlflowClient(sqlite_uri)
    experiment_id = ensure_experiment(client, "losses / MRPC")
    assert ensure_experiment(client, "losses / MRPC") == experiment_id
    location = client.get_experiment(experiment_id).artifact_location
    database_dir = Path(sqlite_uri.removeprefix("sqlite:///")).parent
    assert location == artifact_location(sqlite_uri, "losses / MRPC")
    assert location == (database_dir / "mlartifacts" / "losses_MRPC").as_uri()
    assert artifact_location("http://127.0.0.1:5000", "x") is None  # a server decides for itself


def test_concurrent_trials_creating_one_experiment_agree(sqlite_uri):
    def create(_: int) -> str:
        return ensure_experiment(MlflowClient(sqlite_uri), "raced")

    with ThreadPoolExecutor(6) as pool:
        ids = list(pool.map(create, range(6)))
    assert len(set(ids)) == 1


def test_a_deleted_experiment_is_reported_not_reused(sqlite_uri):
    client = MlflowClient(sqlite_uri)
    client.delete_experiment(ensure_experiment(client, "deleted-one"))
    with pytest.raises(TrackingError, match="'deleted-one' is deleted"):
        ensure_experiment(client, "deleted-one")
