"""Where runs are recorded: resolving, checking and preparing the MLflow tracking store.

Precedence of the tracking URI: `--tracking-uri` > config `tracking.uri` > env `MLFLOW_TRACKING_URI` >
`sqlite:///<cwd>/.dicelab/mlflow.db`. Supported stores are SQLite files, MLflow servers (http/https; a login
from MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD or MLflow's credentials file) and a server's database
(postgresql://, mysql://; its password from the driver's own sources, such as libpq's PGPASSFILE); MLflow 3's
file store is deprecated, so bare paths and file:// URIs are rejected with a hint. Every message shows a URI
through `redact`, so a password written into one never reaches a log or an error line.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from dicelab.errors import TrackingError, first_line
from dicelab.tracking import conventions as names

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Experiment

    from dicelab.config import ExperimentConfig

STORE_DIR = ".dicelab"
DB_NAME = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"  # beside the SQLite file, so artifacts never land in ./mlruns
SERVER_TIMEOUT_S = 5.0
LOGIN_TIMEOUT_S = 30.0  # a login costs a PBKDF2 hash on the server, slow on a busy machine
SQLITE_PREFIX = "sqlite:///"
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")  # an MLflow server's backend store, read directly
# "Creating initial MLflow database tables...", "Updating database tables", alembic's migration steps
SCHEMA_LOGGERS = ("mlflow.store.db.utils", "alembic")


def default_tracking_uri(cwd: str | Path | None = None) -> str:
    """`sqlite:///<abs cwd>/.dicelab/mlflow.db` (absolute, so Ray workers in other directories agree)."""
    return f"{SQLITE_PREFIX}{Path(cwd or Path.cwd()).resolve() / STORE_DIR / DB_NAME}"


def resolve_tracking_uri(cli_uri: str | None, config: ExperimentConfig | None = None) -> str:
    """The tracking URI to use: CLI flag > config tracking.uri > env MLFLOW_TRACKING_URI > default.

    A relative SQLite path is made absolute against the working directory.
    """
    config_uri = config.tracking.uri if config is not None else None
    uri = cli_uri or config_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()
    if uri.startswith(SQLITE_PREFIX):
        path = sqlite_path(uri)
        if not path.is_absolute():
            uri = f"{SQLITE_PREFIX}{path.resolve()}"
    return uri


def sqlite_path(uri: str) -> Path:
    return Path(uri[len(SQLITE_PREFIX) :])


def redact(uri: str) -> str:
    """`uri` with the password of its user part (scheme://user:PASSWORD@host) replaced by ***."""
    return re.sub(r"^([a-zA-Z][\w+.-]*://[^/@:]*):[^/@]*@", r"\1:***@", uri)


def check_tracking(uri: str) -> None:
    """Fail fast, before any training, when the store cannot be used. Raises TrackingError (one line)."""
    scheme = urlparse(uri).scheme
    if scheme == "sqlite":
        _check_sqlite(uri)
    elif scheme in ("http", "https"):
        _check_server(uri)
    elif scheme.split("+", 1)[0] in DATABASE_SCHEMES:
        _check_database(uri)
    elif scheme in ("", "file") or re.fullmatch(r"[a-zA-Z]", scheme):  # bare path (or a Windows drive)
        raise TrackingError(
            f"tracking URI {redact(uri)!r} is a file store, which MLflow 3 deprecates; "
            f"use a SQLite store such as {default_tracking_uri()!r} or an http:// MLflow server"
        )
    else:
        raise TrackingError(
            f"tracking URI {redact(uri)!r}: unsupported scheme {scheme!r} "
            "(use sqlite:///ABS/PATH.db, http://HOST:PORT or postgresql+psycopg://USER@HOST:PORT/DB)"
        )


def require_store_file(uri: str) -> None:
    """For commands that read what a store holds (analyze, export, ui, predict): a SQLite file that does not
    exist is an error, where opening it would create an empty store and find nothing in it."""
    if uri.startswith(SQLITE_PREFIX) and not sqlite_path(uri).is_file():
        path = sqlite_path(uri)
        raise TrackingError(f"no MLflow store at {path} (run a sweep first, or pass --tracking-uri)")


def _check_sqlite(uri: str) -> None:
    if not uri.startswith(SQLITE_PREFIX) or uri == SQLITE_PREFIX:
        raise TrackingError(f"tracking URI {uri!r}: expected sqlite:///PATH/TO/mlflow.db")
    directory = sqlite_path(uri).parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise TrackingError(f"tracking store {uri!r}: cannot create {directory} ({error.strerror})") from None
    if not os.access(directory, os.W_OK):
        raise TrackingError(f"tracking store {uri!r}: directory {directory} is not writable")
    from mlflow import MlflowClient

    from dicelab.tracking.sqlite_template import start_from_template

    try:  # creates or migrates the schema once, here, instead of racing in concurrent trials
        with _quiet(SCHEMA_LOGGERS):
            start_from_template(sqlite_path(uri))
            MlflowClient(uri).search_experiments(max_results=1)
    except Exception as error:
        raise TrackingError(f"tracking store {uri!r} is unusable: {first_line(error)}") from None


@contextlib.contextmanager
def _quiet(loggers: tuple[str, ...]) -> Iterator[None]:
    """Loggers at WARNING for the block: a new store's schema set-up is not news to print."""
    previous = {name: logging.getLogger(name).level for name in loggers}
    for name in loggers:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        for name, level in previous.items():
            logging.getLogger(name).setLevel(level)


def _check_server(uri: str) -> None:
    # MLflow's own client retries for minutes; /health answers at once when the server is up.
    shown = redact(uri)
    base = uri.rstrip("/")
    status = _get_status(base + "/health", shown)
    if status != 200:
        raise TrackingError(
            f"MLflow server {shown} answered /health with HTTP {status}; is it an MLflow server?"
        )
    # /health needs no login; a search does, so a wrong or missing password is caught here, before Ray starts.
    search = f"{base}/api/2.0/mlflow/experiments/search?max_results=1"
    status = _get_status(search, shown, _login_header(), timeout_s=LOGIN_TIMEOUT_S)
    if status == 401:
        raise TrackingError(
            f"MLflow server {shown} refused the login (HTTP 401): set MLFLOW_TRACKING_USERNAME and "
            "MLFLOW_TRACKING_PASSWORD (or ~/.mlflow/credentials) to an account of that server"
        )
    if status == 403:
        raise TrackingError(
            f"MLflow server {shown} denied access (HTTP 403): the account in MLFLOW_TRACKING_USERNAME "
            "needs permissions on that server"
        )
    if status >= 500:
        raise TrackingError(
            f"MLflow server {shown} cannot read its store (HTTP {status}); see the server's log"
        )


def _get_status(
    url: str, shown: str, headers: dict[str, str] | None = None, timeout_s: float = SERVER_TIMEOUT_S
) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise TrackingError(f"MLflow server {shown} is unreachable ({reason})") from None


def _login_header() -> dict[str, str]:
    """Basic auth from where MLflow's client takes it: the environment, else ~/.mlflow/credentials."""
    from dicelab.tracking.mlflow_adapter import basic_auth

    credentials = basic_auth()
    if credentials is None:
        return {}
    token = base64.b64encode(":".join(credentials).encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _check_database(uri: str) -> None:
    """A server's own database (read by `dicelab analyze`): one SELECT, with a short connect timeout."""
    import sqlalchemy as sa

    connect_args = {"connect_timeout": int(SERVER_TIMEOUT_S)} if uri.startswith("postgresql") else {}
    try:
        engine = sa.create_engine(uri, connect_args=connect_args)
    except Exception as error:  # an unknown driver, a malformed URI
        raise TrackingError(f"tracking URI {redact(uri)!r}: {first_line(error)}") from None
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except Exception as error:
        raise TrackingError(f"database {redact(uri)} is unusable: {_driver_message(error)}") from None
    finally:
        engine.dispose()


def _driver_message(error: BaseException) -> str:
    """The driver's own first line, without SQLAlchemy's "(psycopg.OperationalError)" wrapper."""
    return re.sub(r"^\([\w.]+\)\s*", "", first_line(getattr(error, "orig", None) or error))


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside the SQLite file; a server decides for itself."""
    if not uri.startswith(SQLITE_PREFIX):
        return None
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", experiment).strip("_") or "experiment"
    return (sqlite_path(uri).parent / ARTIFACTS_DIR / slug).resolve().as_uri()


def ensure_experiment(client: MlflowClient, name: str) -> str:
    """The id of experiment `name`, created if missing; safe when concurrent trials create it at once."""
    from mlflow.exceptions import MlflowException

    from dicelab.tracking.mlflow_adapter import already_exists

    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return client.create_experiment(
                name,
                artifact_location=artifact_location(client.tracking_uri, name),
                tags={names.EXPERIMENT_KIND: names.EXPERIMENT_KIND_TRAINING},
            )
        except MlflowException as error:
            if not already_exists(error):
                raise
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise TrackingError(
                f"experiment {name!r} exists but cannot be read from {redact(client.tracking_uri)}"
            )
    if experiment.lifecycle_stage != "active":
        raise TrackingError(
            f"experiment {name!r} is deleted in {redact(client.tracking_uri)}; restore it in the MLflow UI "
            "or choose another tracking.experiment"
        )
    mark_training_experiment(client, experiment)
    return experiment.experiment_id


def mark_training_experiment(client: MlflowClient, experiment: Experiment) -> None:
    """Tag an experiment made before dicelab tagged its experiments, so the UI opens on its runs;
    a kind someone chose in the UI is kept."""
    if names.EXPERIMENT_KIND not in experiment.tags:
        client.set_experiment_tag(
            experiment.experiment_id, names.EXPERIMENT_KIND, names.EXPERIMENT_KIND_TRAINING
        )
