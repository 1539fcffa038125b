"""Every MLflow touch point outside its documented client API, in one place, each with its reason and its
fallback.

dicelab talks to MLflow through `mlflow.MlflowClient`, `mlflow.entities`, `mlflow.exceptions`,
`mlflow.artifacts`, `mlflow.models` and `mlflow.pyfunc`. What they do not offer comes from MLflow's own
modules, through this module only. Each touch point tries MLflow's own name first and, when a release has
moved or removed it (ImportError, AttributeError), falls back to plain behaviour built on MLflow's documented
names and client, in one small function per touch point: the documented tag names and value limits as
literals, the error code compared as a string, the credentials read from the environment and
~/.mlflow/credentials, the schema made by opening the store with the client, the tracking URI set and put
back with `mlflow.set_tracking_uri`, a local artifact root written by copying.
`tests/tracking/test_mlflow_adapter.py` runs each touch point both ways and asserts the same result, fails
naming the touch point when an MLflow release moves one, and keeps every other dicelab module off
`mlflow.utils`, `mlflow.store`, `mlflow.protos` and MLflow's private modules. The columns of MLflow's
tables that the analysis reads from a SQL store are declared in `dicelab.tracking.sql_tables`, which stays
free of MLflow's import and has its own contract. The Ray counterpart is `dicelab.sweeps.ray_adapter`.

Importing this module imports MLflow (about 3 CPU-seconds): modules that must stay light import it inside the
function that needs it.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import shutil
import sqlite3
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

from mlflow.exceptions import MlflowException

__all__ = [
    "MAX_PARAM_VALUE_LENGTH",
    "MAX_TAG_VALUE_LENGTH",
    "PARENT_RUN_ID_TAG",
    "RUN_NAME_TAG",
    "already_exists",
    "basic_auth",
    "create_sqlite_schema",
    "log_artifacts_at",
    "use_tracking_uri",
]

# A `from module import name` of a moved name raises ImportError; a name that a module defines but a
# release stopped exporting can surface as AttributeError.
_MOVED = (ImportError, AttributeError)


def _tag_names() -> tuple[str, str]:
    """MLflow's system tags (documented as tag names, defined in mlflow.utils): a nested run names its
    parent with the first; the second is the run name the UI shows, which dicelab suffixes with the trial's
    result."""
    try:
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME
    except _MOVED:
        return _documented_tag_names()
    return MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME


def _documented_tag_names() -> tuple[str, str]:
    """The tag names as MLflow's documentation of system tags spells them."""
    return "mlflow.parentRunId", "mlflow.runName"


def _value_limits() -> tuple[int, int]:
    """The store's value limits (param, tag); dicelab clips long values itself rather than have a whole
    log_batch refused."""
    try:
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH
    except _MOVED:
        return _documented_value_limits()
    return MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH


def _documented_value_limits() -> tuple[int, int]:
    """The limits MLflow 3.x documents for a param's and a tag's value."""
    return 6000, 8000


PARENT_RUN_ID_TAG, RUN_NAME_TAG = _tag_names()
MAX_PARAM_VALUE_LENGTH, MAX_TAG_VALUE_LENGTH = _value_limits()


def already_exists(error: MlflowException) -> bool:
    """Whether `error` is MLflow's RESOURCE_ALREADY_EXISTS (two processes creating one experiment or
    registered model at once): its error code is a protobuf enum name, not an exception class."""
    try:
        from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode
    except _MOVED:
        return _already_exists_by_name(error)
    return error.error_code == ErrorCode.Name(RESOURCE_ALREADY_EXISTS)


def _already_exists_by_name(error: MlflowException) -> bool:
    """The code as the string MLflow's REST API documents."""
    return error.error_code == "RESOURCE_ALREADY_EXISTS"


def basic_auth() -> tuple[str, str] | None:
    """(username, password) from where MLflow's own client reads them: MLFLOW_TRACKING_USERNAME /
    MLFLOW_TRACKING_PASSWORD, else ~/.mlflow/credentials; None when either is missing. dicelab's /health check
    sends them without building a client."""
    try:
        from mlflow.utils.credentials import read_mlflow_creds
    except _MOVED:
        username, password = _documented_credentials()
    else:
        credentials = read_mlflow_creds()
        username, password = credentials.username, credentials.password
    if not username or not password:
        return None
    return username, password


def _documented_credentials() -> tuple[str | None, str | None]:
    """MLflow's documented lookup, field by field: the environment variable, else the `[mlflow]` section of
    ~/.mlflow/credentials with the variable's name in lower case."""
    path = Path(os.path.expanduser("~/.mlflow/credentials"))
    section: dict[str, str] = {}
    if path.is_file():
        parser = configparser.ConfigParser()
        parser.read(path)
        if parser.has_section("mlflow"):
            section = dict(parser["mlflow"])
    username, password = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"
    return (
        os.environ.get(username) or section.get(username.lower()),
        os.environ.get(password) or section.get(password.lower()),
    )


def create_sqlite_schema(uri: str) -> None:
    """MLflow's tables at their newest revision in the new SQLite file of `uri`, and nothing in them (not the
    Default experiment, whose artifact location depends on the store that opens it). A copy of this file is
    a new store that MLflow opens without running its ~100 schema migrations (about 3 CPU-seconds): MLflow's
    store creates its tables only when they are missing, then its Default experiment when there is none."""
    try:
        from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine_with_retry
    except _MOVED:
        _schema_through_client(uri)
        return
    engine = create_sqlalchemy_engine_with_retry(uri)
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()


def _schema_through_client(uri: str) -> None:
    """The same file through the public client, slower: opening a store runs the migrations and adds the
    Default experiment, whose row (the only one MLflow writes on opening) is then deleted. Built beside the
    file and moved in, since MLflow keeps each store it opened for the process: `uri` itself stays unopened,
    and its first client adds the Default experiment as for any new store."""
    from mlflow import MlflowClient

    # SQLAlchemy's form: sqlite:///relative.db, sqlite:////absolute.db
    target = Path(uri.removeprefix("sqlite:///"))
    scratch = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    try:
        MlflowClient(f"sqlite:///{scratch}").search_experiments()
        with contextlib.closing(sqlite3.connect(scratch)) as database, database:
            database.execute("DELETE FROM experiments")
        os.replace(scratch, target)
    finally:
        scratch.unlink(missing_ok=True)


@contextlib.contextmanager
def use_tracking_uri(uri: str) -> Iterator[None]:
    """Point the process's tracking URI at `uri` for the block, then back: `models:/` and `runs:/` URIs (a
    download, a model version's source) resolve through it, whatever store a client was given. MLflow's own
    scoped switch, which restores the previous URI even when the block raises."""
    try:
        from mlflow.tracking._tracking_service.utils import _use_tracking_uri
    except _MOVED:
        scoped = _scoped_tracking_uri(uri)
    else:
        scoped = _use_tracking_uri(uri)
    with scoped:
        yield


@contextlib.contextmanager
def _scoped_tracking_uri(uri: str) -> Iterator[None]:
    """The same switch with the public setter. One difference: where no URI was set, the one MLflow resolved
    then (from MLFLOW_TRACKING_URI or its default) stays set afterwards."""
    import mlflow

    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before)


def log_artifacts_at(artifact_uri: str, folder: str, artifact_path: str) -> None:
    """Log `folder` under `artifact_path` of the run whose artifact root is `artifact_uri`, through MLflow's
    artifact repository for that URI: what `MlflowClient.log_artifacts` does once its tracking store has
    looked the root up. A caller that read the root with SQL (`dicelab.analysis`) spares opening the store,
    1.5 CPU-seconds for SQLite, where MLflow configures every ORM mapper."""
    try:
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    except _MOVED:
        _copy_to_local_root(artifact_uri, folder, artifact_path)
        return
    get_artifact_repository(artifact_uri).log_artifacts(folder, artifact_path)


def _copy_to_local_root(artifact_uri: str, folder: str, artifact_path: str) -> None:
    """MLflow's public API uploads only by run id (`MlflowClient.log_artifacts`), through the tracking
    store; `mlflow.artifacts` only reads. Without the registry a local root (a path or file: URI) is written
    as MLflow's local repository writes it, by copying the files (not their permissions); any other root
    (s3:, gs:, ...) raises an MlflowException that names it: there is no public upload to a bare root."""
    scheme = urllib.parse.urlparse(artifact_uri).scheme
    if scheme == "file":
        root = Path(urllib.request.url2pathname(urllib.parse.urlparse(artifact_uri).path))
    elif not scheme:
        root = Path(artifact_uri)
    else:
        raise MlflowException(
            f"cannot write to artifact root {artifact_uri}: MLflow's artifact repository registry moved, and "
            "only a local root is written without it"
        )
    shutil.copytree(folder, root / artifact_path, copy_function=shutil.copyfile, dirs_exist_ok=True)
