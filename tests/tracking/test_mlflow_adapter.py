"""The MLflow adapter's contract: each touch point outside MLflow's documented client API still does what
dicelab relies on (a failure names it), and no other dicelab module reaches MLflow's internals."""

from __future__ import annotations

import ast
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from dicelab.tracking import mlflow_adapter
from dicelab.tracking.store import check_tracking

PLATFORM = Path(__file__).resolve().parents[2] / "platform" / "dicelab"
INTERNAL = ("mlflow.utils", "mlflow.store", "mlflow.protos", "mlflow.server", "mlflow.tracking._")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One SQLite store for the module, as dicelab makes one."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'm.db'}"
    check_tracking(uri)
    return uri


def test_the_system_tags_are_the_ones_the_ui_reads():
    assert mlflow_adapter.PARENT_RUN_ID_TAG == "mlflow.parentRunId", "mlflow.utils.mlflow_tags moved"
    assert mlflow_adapter.RUN_NAME_TAG == "mlflow.runName", "mlflow.utils.mlflow_tags moved"


def test_the_value_limits_are_what_the_store_keeps(store):
    client = MlflowClient(store)
    run_id = client.create_run(client.create_experiment("limits")).info.run_id
    client.set_tag(run_id, "at-limit", "x" * mlflow_adapter.MAX_TAG_VALUE_LENGTH)
    client.log_param(run_id, "at-limit", "x" * mlflow_adapter.MAX_PARAM_VALUE_LENGTH)
    client.log_param(run_id, "over", "x" * (mlflow_adapter.MAX_PARAM_VALUE_LENGTH + 1))
    data = client.get_run(run_id).data
    assert len(data.tags["at-limit"]) == mlflow_adapter.MAX_TAG_VALUE_LENGTH
    assert len(data.params["at-limit"]) == mlflow_adapter.MAX_PARAM_VALUE_LENGTH
    # one character more is cut to the limit (MLflow 3.17 truncates, older releases refused): the limit is
    # the store's, so dicelab's own clipping keeps what it chose to keep
    assert len(data.params["over"]) == mlflow_adapter.MAX_PARAM_VALUE_LENGTH, "mlflow.utils.validation moved"


def test_already_exists_tells_a_duplicate_from_other_errors(store):
    client = MlflowClient(store)
    client.create_experiment("twice")
    with pytest.raises(MlflowException) as duplicate:
        client.create_experiment("twice")
    assert mlflow_adapter.already_exists(duplicate.value), "mlflow.protos.databricks_pb2 error codes moved"
    with pytest.raises(MlflowException) as missing:
        client.get_run("0" * 32)
    assert not mlflow_adapter.already_exists(missing.value)


def test_basic_auth_reads_mlflows_environment_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.mlflow/credentials
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    assert mlflow_adapter.basic_auth() is None
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ada")
    assert mlflow_adapter.basic_auth() is None  # a user without a password sends nothing
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret")
    assert mlflow_adapter.basic_auth() == ("ada", "s3cret"), "mlflow.utils.credentials moved"


def test_basic_auth_reads_mlflows_credentials_file(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text(
        "[mlflow]\nmlflow_tracking_username = grace\nmlflow_tracking_password = hopper\n"
    )
    assert mlflow_adapter.basic_auth() == ("grace", "hopper")


def test_use_tracking_uri_is_scoped_and_restored_on_error(store):
    before = mlflow.get_tracking_uri()
    inside = store
    with mlflow_adapter.use_tracking_uri(inside):
        assert mlflow.get_tracking_uri() == inside
    assert mlflow.get_tracking_uri() == before
    with pytest.raises(RuntimeError), mlflow_adapter.use_tracking_uri(inside):
        raise RuntimeError("boom")
    assert mlflow.get_tracking_uri() == before


def _internal_imports(path: Path, root: Path = PLATFORM.parent) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found += [f"{path.relative_to(root)}:{node.lineno} {name}" for name in names if _internal(name)]
    return found


def _internal(module: str) -> bool:
    return module.startswith(INTERNAL) or any(
        part.startswith("_") for part in module.split(".")[1:] if module.startswith("mlflow.")
    )


def test_no_other_module_reaches_mlflows_internals():
    adapter = PLATFORM / "tracking" / "mlflow_adapter.py"
    offenders = [
        line for path in sorted(PLATFORM.rglob("*.py")) if path != adapter for line in _internal_imports(path)
    ]
    assert not offenders, "import MLflow internals through dicelab.tracking.mlflow_adapter: " + "; ".join(
        offenders
    )


def test_the_boundary_check_sees_an_internal_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import mlflow.entities\n"
        "from mlflow.exceptions import MlflowException\n"
        "def f():\n"
        "    from mlflow.utils.rest_utils import http_request\n"
        "    from mlflow.tracking._tracking_service import utils\n"
    )
    found = _internal_imports(sample, tmp_path)
    assert [line.split()[0] for line in found] == ["sample.py:4", "sample.py:4", "sample.py:5", "sample.py:5"]


def test_create_sqlite_schema_makes_mlflows_tables_at_head_and_no_rows(tmp_path):
    import sqlite3

    uri = f"sqlite:///{tmp_path / 'schema.db'}"
    mlflow_adapter.create_sqlite_schema(uri)
    with sqlite3.connect(tmp_path / "schema.db") as connection:
        assert connection.execute("SELECT count(*) FROM experiments").fetchone() == (0,)
        (revision,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    assert revision, "create_sqlite_schema: MLflow's migrations did not run"
    assert MlflowClient(uri).get_experiment("0").name == "Default"  # MLflow opens it as one of its own


def test_log_artifacts_at_writes_where_mlflows_client_lists_a_runs_artifacts(store, tmp_path):
    client = MlflowClient(store)
    run = client.create_run(
        client.create_experiment("artifacts-at", artifact_location=str(tmp_path / "artifacts"))
    )
    folder = tmp_path / "report"
    (folder / "figures").mkdir(parents=True)
    (folder / "report.md").write_text("# report")
    (folder / "figures" / "a.png").write_bytes(b"png")
    mlflow_adapter.log_artifacts_at(run.info.artifact_uri, str(folder), "report")
    listed = {item.path for item in client.list_artifacts(run.info.run_id, "report")}
    assert listed == {"report/report.md", "report/figures"}, "log_artifacts_at: not where MLflow lists them"
    assert [item.path for item in client.list_artifacts(run.info.run_id, "report/figures")] == [
        "report/figures/a.png"
    ]
