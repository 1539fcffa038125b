"""The MLflow store the sweeps wrote to, as the analysis reads it: experiments by name and a run's artifact
files.

Two sources. MLflow's public client (`MlflowClient`, `mlflow.artifacts`) reads any store, and always an
http:// tracking server, whose logins and permissions then apply. A database URI (the embedded SQLite file,
a team server's PostgreSQL) is read by default with SELECTs on MLflow's own tables
(`dicelab.tracking.sql_tables`), without importing MLflow or opening its store: `dicelab analyze` of a
1,000-trial sweep took 0.63x the wall time (benchmarks/results/analyze_ab_sql.json). `DICELAB_ANALYSIS_SQL=0`
turns that off; and where MLflow's tables are not what dicelab declares (a newer MLflow's schema), the
client reads them instead, after one warning, for the rest of the process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa

from dicelab.errors import TrackingError, first_line
from dicelab.tracking import sql_tables
from dicelab.tracking.store import (
    SQLITE_PREFIX,
    check_tracking,
    redact,
    require_store_file,
    resolve_tracking_uri,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

T = TypeVar("T")
logger = logging.getLogger(__name__)

SQL_SWITCH = "DICELAB_ANALYSIS_SQL"  # "0": read a database URI through MLflow's client too
_PROGRESS_BAR_VARIABLE = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
_unreadable: set[str] = set()  # database URIs whose tables SQL could not read: the client reads them
# Artifacts behind a tracking server's proxy: MLflow reaches them only through an http(s) tracking URI, so
# with a database URI they cannot be had (MLflow's own client fails on them too).
_PROXIED = "mlflow-artifacts"


class ArtifactUnavailable(Exception):
    """A run's artifact that cannot be read (missing, unreachable, the store failed): callers fall back."""


class SqlUnreadable(Exception):
    """MLflow's tables could not be read with SQL (a schema dicelab does not know): the client reads them."""


@dataclass(frozen=True)
class Experiment:
    experiment_id: str
    name: str


def open_store(tracking_uri: str | None) -> str:
    """The store's URI (default: $MLFLOW_TRACKING_URI, else `.dicelab/mlflow.db` under the working directory,
    as everywhere in dicelab), checked usable; never creates an empty store."""
    uri = resolve_tracking_uri(tracking_uri)
    require_store_file(uri)  # opening a missing SQLite file would create an empty store
    if not uri.startswith(SQLITE_PREFIX):  # a server that is down: one line now, not minutes of retries
        check_tracking(uri)
    return uri


def reads_sql(uri: str) -> bool:
    """Whether `uri` is read with SQL: a database URI, unless DICELAB_ANALYSIS_SQL=0 or its tables failed."""
    return (
        sql_tables.is_database_uri(uri) and os.environ.get(SQL_SWITCH, "1") != "0" and uri not in _unreadable
    )


def sql_or_client(uri: str, sql: Callable[[], T], public: Callable[[], T]) -> T:
    """`sql()` where `uri` is read with SQL, else (and when it finds tables it cannot read) `public()`."""
    if reads_sql(uri):
        try:
            return sql()
        except SqlUnreadable as error:
            give_up_sql(uri, error)
    return public()


def give_up_sql(uri: str, error: SqlUnreadable) -> None:
    _unreadable.add(uri)
    logger.warning("reading MLflow's tables failed (%s): reading through MLflow's client instead", error)


def client(uri: str) -> MlflowClient:
    """MLflow's client on `uri` (MLflow's import is paid here, not by `dicelab analyze --help`)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


@contextlib.contextmanager
def connection(uri: str) -> Iterator[sa.Connection]:
    """A read connection to a SQL store. A failure in a store of MLflow's (it has MLflow's migration table)
    is SqlUnreadable, for the client to read it instead; elsewhere (not MLflow's, unreachable) one
    TrackingError line, since MLflow's client would create its tables in someone else's database."""
    engine = sa.create_engine(uri)
    try:
        with engine.connect() as opened:
            yield opened
    except Exception as raised:
        # pandas' read_sql raises its own DatabaseError from SQLAlchemy's
        error = raised if isinstance(raised, sa.exc.SQLAlchemyError) else raised.__cause__
        if not isinstance(error, sa.exc.SQLAlchemyError):
            raise
        if _has_mlflow_schema(engine):
            raise SqlUnreadable(f"{redact(uri)}: {first_line(error)}") from None
        raise TrackingError(f"cannot read the MLflow store {redact(uri)}: {first_line(error)}") from None
    finally:
        engine.dispose()


def _has_mlflow_schema(engine: sa.Engine) -> bool:
    try:
        return sa.inspect(engine).has_table(sql_tables.MIGRATIONS)
    except sa.exc.SQLAlchemyError:
        return False


def find_experiment(uri: str, name: str) -> Experiment:
    """The active experiment called `name`; a TrackingError listing the available names otherwise."""
    found, available = sql_or_client(uri, lambda: _find_sql(uri, name), lambda: _find_api(uri, name))
    if found is not None:
        return found
    listing = ", ".join(sorted(available)) if available else "none"
    raise TrackingError(f"no experiment {name!r} in {redact(uri)} (available: {listing})")


def _find_sql(uri: str, name: str) -> tuple[Experiment | None, list[str]]:
    table = sql_tables.EXPERIMENTS.c
    active = table.lifecycle_stage == sql_tables.ACTIVE
    with connection(uri) as opened:
        ids = opened.execute(sa.select(table.experiment_id).where(table.name == name, active)).scalars().all()
        if len(ids) == 1:
            return Experiment(str(ids[0]), name), []
        if len(ids) > 1:  # the same name in several MLflow workspaces: only the server can tell them apart
            raise TrackingError(
                f"{len(ids)} experiments are called {name!r} in {redact(uri)} (MLflow workspaces): "
                "read them through the tracking server's http:// URI"
            )
        return None, list(opened.execute(sa.select(table.name).where(active)).scalars())


def _find_api(uri: str, name: str) -> tuple[Experiment | None, list[str]]:
    from mlflow.entities import ViewType
    from mlflow.exceptions import MlflowException

    mlflow_client = client(uri)
    try:
        experiment = mlflow_client.get_experiment_by_name(name)
        if experiment is not None and experiment.lifecycle_stage == "active":
            return Experiment(experiment.experiment_id, experiment.name), []
        return None, [e.name for e in mlflow_client.search_experiments(view_type=ViewType.ACTIVE_ONLY)]
    except MlflowException as error:
        raise TrackingError(f"cannot read the MLflow store {redact(uri)}: {first_line(error)}") from None


def download_artifact(uri: str, run_id: str, artifact_path: str, destination: Path) -> Path:
    """A run's artifact file, as a local path under `destination` (or where a local store keeps it).
    Raises ArtifactUnavailable when it cannot be read."""
    if reads_sql(uri):
        try:
            root = artifact_root(uri, run_id)
        except SqlUnreadable as error:
            give_up_sql(uri, error)
        else:
            if urllib.parse.urlparse(root).scheme in ("", "file"):
                local = _local_path(root) / artifact_path
                if not local.is_file():
                    raise ArtifactUnavailable(f"{local} does not exist")
                return local
            return _download(artifact_uri=f"{root.rstrip('/')}/{artifact_path}", destination=destination)
    return _download(run_id=run_id, artifact_path=artifact_path, tracking_uri=uri, destination=destination)


def artifact_root(uri: str, run_id: str) -> str:
    """A run's artifact root in a SQL store, read with SQL, where this process can reach it without the
    tracking server. Raises ArtifactUnavailable otherwise, SqlUnreadable when the tables cannot be read."""
    table = sql_tables.RUNS.c
    with connection(uri) as opened:
        root = opened.execute(sa.select(table.artifact_uri).where(table.run_uuid == run_id)).scalar()
    if not root:
        raise ArtifactUnavailable(f"run {run_id} has no artifact location")
    if urllib.parse.urlparse(root).scheme == _PROXIED:
        raise ArtifactUnavailable(f"{root} is reachable only through the tracking server")
    return str(root)


def _local_path(root: str) -> Path:
    if root.startswith("file:"):
        return Path(urllib.request.url2pathname(urllib.parse.urlparse(root).path))
    return Path(root)


def _download(*, destination: Path, **where: str) -> Path:
    import mlflow.artifacts
    from mlflow.exceptions import MlflowException

    with quiet_artifact_transfers():
        try:
            return Path(mlflow.artifacts.download_artifacts(dst_path=str(destination), **where))
        except (MlflowException, OSError) as error:
            raise ArtifactUnavailable(first_line(error)) from None


@contextlib.contextmanager
def quiet_artifact_transfers() -> Iterator[None]:
    """MLflow draws tqdm bars while moving artifacts; analysis has its own progress display."""
    previous = os.environ.get(_PROGRESS_BAR_VARIABLE)
    os.environ[_PROGRESS_BAR_VARIABLE] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(_PROGRESS_BAR_VARIABLE, None)
        else:
            os.environ[_PROGRESS_BAR_VARIABLE] = previous
