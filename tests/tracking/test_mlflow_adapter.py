"""The MLflow adapter's contract: each touch point outside MLflow's documented client API still does what
dicelab relies on (a failure names it), through MLflow's own name and through its fallback alike, and no
other dicelab module reaches MLflow's internals."""

from __future__ import annotations

import ast
import contextlib
import importlib
import sqlite3
import sys
import types
import uuid
from collections.abc import Callable, Iterator
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


@pytest.fixture(params=["private", "fallback"])
def moved(request, monkeypatch) -> Callable[..., contextlib.AbstractContextManager[None]]:
    """Each touch point runs both ways: in `with moved(module):` the private path finds `module` as it is,
    and the fallback finds it without its names, as on a release that moved them (MLflow's own code, which
    already holds the real module, keeps working; the module is back after the block)."""

    @contextlib.contextmanager
    def move(*modules: str) -> Iterator[None]:
        with monkeypatch.context() as patch:
            for module in modules:
                importlib.import_module(module)
                if request.param == "fallback":
                    patch.setitem(sys.modules, module, types.ModuleType(module))
            yield

    return move


def test_the_system_tags_are_the_ones_the_ui_reads(moved):
    with moved("mlflow.utils.mlflow_tags"):
        names = mlflow_adapter._tag_names()
    assert names == ("mlflow.parentRunId", "mlflow.runName"), "mlflow.utils.mlflow_tags moved"
    assert names == (mlflow_adapter.PARENT_RUN_ID_TAG, mlflow_adapter.RUN_NAME_TAG)


def test_the_value_limits_are_what_the_store_keeps(store, moved):
    with moved("mlflow.utils.validation"):
        max_param, max_tag = mlflow_adapter._value_limits()
    assert (max_param, max_tag) == (
        mlflow_adapter.MAX_PARAM_VALUE_LENGTH,
        mlflow_adapter.MAX_TAG_VALUE_LENGTH,
    )
    client = MlflowClient(store)
    run_id = client.create_run(client.create_experiment(f"limits-{uuid.uuid4().hex}")).info.run_id
    client.set_tag(run_id, "at-limit", "x" * max_tag)
    client.log_param(run_id, "at-limit", "x" * max_param)
    client.log_param(run_id, "over", "x" * (max_param + 1))
    data = client.get_run(run_id).data
    assert len(data.tags["at-limit"]) == max_tag
    assert len(data.params["at-limit"]) == max_param
    # one character more is cut to the limit (MLflow 3.17 truncates, older releases refused): the limit is
    # the store's, so dicelab's own clipping keeps what it chose to keep
    assert len(data.params["over"]) == max_param, "mlflow.utils.validation moved"


def test_already_exists_tells_a_duplicate_from_other_errors(store, moved):
    client = MlflowClient(store)
    name = f"twice-{uuid.uuid4().hex}"
    client.create_experiment(name)
    with pytest.raises(MlflowException) as duplicate:
        client.create_experiment(name)
    with pytest.raises(MlflowException) as missing:
        client.get_run("0" * 32)
    with moved("mlflow.protos.databricks_pb2"):
        assert mlflow_adapter.already_exists(duplicate.value), "mlflow.protos.databricks_pb2 codes moved"
        assert not mlflow_adapter.already_exists(missing.value)


def test_basic_auth_reads_mlflows_environment_variables(monkeypatch, tmp_path, moved):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.mlflow/credentials
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    with moved("mlflow.utils.credentials"):
        assert mlflow_adapter.basic_auth() is None
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ada")
        assert mlflow_adapter.basic_auth() is None  # a user without a password sends nothing
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret")
        assert mlflow_adapter.basic_auth() == ("ada", "s3cret"), "mlflow.utils.credentials moved"


def test_basic_auth_reads_mlflows_credentials_file(monkeypatch, tmp_path, moved):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text(
        "[mlflow]\nmlflow_tracking_username = grace\nmlflow_tracking_password = hopper\n"
    )
    with moved("mlflow.utils.credentials"):
        assert mlflow_adapter.basic_auth() == ("grace", "hopper")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "from-env")  # field by field, the environment first
        assert mlflow_adapter.basic_auth() == ("grace", "from-env")


def test_basic_auth_without_mlflows_credentials_module(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mlflow.utils.credentials", None)  # the whole module gone
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ada")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret")
    assert mlflow_adapter.basic_auth() == ("ada", "s3cret")


def test_use_tracking_uri_is_scoped_and_restored_on_error(store, moved):
    before = mlflow.get_tracking_uri()
    inside = store
    with moved("mlflow.tracking._tracking_service.utils"):
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


def test_create_sqlite_schema_makes_mlflows_tables_at_head_and_no_rows_both_ways(tmp_path, monkeypatch):
    private = tmp_path / "private.db"
    mlflow_adapter.create_sqlite_schema(f"sqlite:///{private}")
    module = "mlflow.store.db.utils"
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, module, types.ModuleType(module))
        mlflow_adapter.create_sqlite_schema(f"sqlite:///{tmp_path / 'fallback.db'}")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fallback.db", "private.db"]  # no scratch
    schema, counts, revision = _contents(private)
    assert counts["experiments"] == 0
    assert revision, "create_sqlite_schema: MLflow's migrations did not run"
    assert _contents(tmp_path / "fallback.db") == (schema, counts, revision)
    for made in ("private.db", "fallback.db"):  # MLflow opens each as one of its own
        assert MlflowClient(f"sqlite:///{tmp_path / made}").get_experiment("0").name == "Default"


def _contents(path: Path) -> tuple[dict[str, list[str]], dict[str, int], list[tuple[str]]]:
    """A store file's schema (each object's definition as sorted lines: MLflow's migrations write a table's
    constraints in an order that varies between processes), every table's row count and its revision."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        objects = connection.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall()
        schema = {
            name: sorted(line.strip().rstrip(",") for line in sql.splitlines()) for name, sql in objects
        }
        tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        counts = {
            table: connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] for table in tables
        }
        revision = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    return schema, counts, revision


def test_log_artifacts_at_writes_where_mlflows_client_lists_a_runs_artifacts(store, tmp_path, moved):
    client = MlflowClient(store)
    run = client.create_run(
        client.create_experiment(
            f"artifacts-at-{uuid.uuid4().hex}", artifact_location=str(tmp_path / "artifacts")
        )
    )
    folder = tmp_path / "report"
    (folder / "figures").mkdir(parents=True)
    (folder / "report.md").write_text("# report")
    (folder / "figures" / "a.png").write_bytes(b"png")
    with moved("mlflow.store.artifact.artifact_repository_registry"):
        mlflow_adapter.log_artifacts_at(run.info.artifact_uri, str(folder), "report")
    listed = {item.path for item in client.list_artifacts(run.info.run_id, "report")}
    assert listed == {"report/report.md", "report/figures"}, "log_artifacts_at: not where MLflow lists them"
    assert [item.path for item in client.list_artifacts(run.info.run_id, "report/figures")] == [
        "report/figures/a.png"
    ]


def test_log_artifacts_at_without_the_registry_writes_a_file_uri_and_names_a_remote_root(
    tmp_path, monkeypatch
):
    module = "mlflow.store.artifact.artifact_repository_registry"
    monkeypatch.setitem(sys.modules, module, types.ModuleType(module))
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "report.md").write_text("# report")
    root = tmp_path / "run" / "artifacts"
    mlflow_adapter.log_artifacts_at(root.as_uri(), str(tmp_path / "report"), "report")
    assert (root / "report" / "report.md").read_text() == "# report"
    with pytest.raises(MlflowException, match="s3://bucket/0/abc/artifacts"):
        mlflow_adapter.log_artifacts_at("s3://bucket/0/abc/artifacts", str(tmp_path / "report"), "report")
