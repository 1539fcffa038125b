"""Every MLflow touch point outside its documented client API, in one place, each with its reason.

dicelab talks to MLflow through `mlflow.MlflowClient`, `mlflow.entities`, `mlflow.exceptions`,
`mlflow.artifacts`, `mlflow.models` and `mlflow.pyfunc`. What they do not offer comes from MLflow's own
modules, through this module only: `tests/tracking/test_mlflow_adapter.py` fails naming the touch point when
an MLflow release moves one, and keeps every other dicelab module off `mlflow.utils`, `mlflow.store`,
`mlflow.protos` and MLflow's private modules. The columns of MLflow's tables that the analysis reads from a
SQL store are declared in `dicelab.tracking.sql_tables`, which stays free of MLflow's import and has its own
contract. The Ray counterpart is `dicelab.sweeps.ray_adapter`.

Importing this module imports MLflow (about 3 CPU-seconds): modules that must stay light import it inside the
function that needs it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mlflow.exceptions import MlflowException

# Why: MLflow's system tags (documented as tag names, defined in mlflow.utils): a nested run names its parent
# with the first; the second is the run name the UI shows, which dicelab suffixes with the trial's result.
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID as PARENT_RUN_ID_TAG
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME as RUN_NAME_TAG

# Why: the store's value limits; dicelab clips long values itself rather than have a whole log_batch refused.
from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH as MAX_PARAM_VALUE_LENGTH
from mlflow.utils.validation import MAX_TAG_VAL_LENGTH as MAX_TAG_VALUE_LENGTH

__all__ = [
    "MAX_PARAM_VALUE_LENGTH",
    "MAX_TAG_VALUE_LENGTH",
    "PARENT_RUN_ID_TAG",
    "RUN_NAME_TAG",
    "already_exists",
    "basic_auth",
    "create_sqlite_schema",
    "use_tracking_uri",
]


def already_exists(error: MlflowException) -> bool:
    """Whether `error` is MLflow's RESOURCE_ALREADY_EXISTS (two processes creating one experiment or
    registered model at once): its error code is a protobuf enum name, not an exception class."""
    from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode

    return error.error_code == ErrorCode.Name(RESOURCE_ALREADY_EXISTS)


def basic_auth() -> tuple[str, str] | None:
    """(username, password) from where MLflow's own client reads them: MLFLOW_TRACKING_USERNAME /
    MLFLOW_TRACKING_PASSWORD, else ~/.mlflow/credentials; None when either is missing. dicelab's /health check
    sends them without building a client."""
    from mlflow.utils.credentials import read_mlflow_creds

    credentials = read_mlflow_creds()
    if not credentials.username or not credentials.password:
        return None
    return credentials.username, credentials.password


def create_sqlite_schema(uri: str) -> None:
    """MLflow's tables at their newest revision in the new SQLite file of `uri`, and nothing in them (not the
    Default experiment, whose artifact location depends on the store that opens it). A copy of this file is
    a new store that MLflow opens without running its ~100 schema migrations (about 3 CPU-seconds): MLflow's
    store creates its tables only when they are missing, then its Default experiment when there is none."""
    from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine_with_retry

    engine = create_sqlalchemy_engine_with_retry(uri)
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()


@contextlib.contextmanager
def use_tracking_uri(uri: str) -> Iterator[None]:
    """Point the process's tracking URI at `uri` for the block, then back: `models:/` and `runs:/` URIs (a
    download, a model version's source) resolve through it, whatever store a client was given. MLflow's own
    scoped switch, which restores the previous URI even when the block raises."""
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    with _use_tracking_uri(uri):
        yield


def log_artifacts_at(artifact_uri: str, folder: str, artifact_path: str) -> None:
    """Log `folder` under `artifact_path` of the run whose artifact root is `artifact_uri`, through MLflow's
    artifact repository for that URI: what `MlflowClient.log_artifacts` does once its tracking store has
    looked the root up. A caller that read the root with SQL (`dicelab.analysis`) spares opening the store,
    1.5 CPU-seconds for SQLite, where MLflow configures every ORM mapper."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    get_artifact_repository(artifact_uri).log_artifacts(folder, artifact_path)
