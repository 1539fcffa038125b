"""Connecting to the MLflow store the sweeps wrote to, and finding experiments in it by name."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from mlflow.entities import Experiment, ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from dicelab.errors import TrackingError, first_line
from dicelab.tracking.store import (
    SQLITE_PREFIX,
    check_tracking,
    redact,
    require_store_file,
    resolve_tracking_uri,
)

_PROGRESS_BAR_VARIABLE = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


def open_client(tracking_uri: str | None) -> tuple[MlflowClient, str]:
    """A client on `tracking_uri` (default: $MLFLOW_TRACKING_URI, else `.dicelab/mlflow.db` under the
    working directory, as everywhere in dicelab); never creates an empty store."""
    uri = resolve_tracking_uri(tracking_uri)
    require_store_file(uri)  # opening a missing SQLite file would create an empty store
    if not uri.startswith(SQLITE_PREFIX):  # a server that is down: one line now, not minutes of retries
        check_tracking(uri)
    return MlflowClient(tracking_uri=uri), uri


def find_experiment(client: MlflowClient, name: str) -> Experiment:
    """The active experiment called `name`; a TrackingError listing the available names otherwise."""
    try:
        experiment = client.get_experiment_by_name(name)
        if experiment is not None and experiment.lifecycle_stage == "active":
            return experiment
        available = sorted(e.name for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY))
    except MlflowException as error:
        raise TrackingError(
            f"cannot read the MLflow store {redact(client.tracking_uri)}: {first_line(error)}"
        ) from None
    listing = ", ".join(available) if available else "none"
    raise TrackingError(f"no experiment {name!r} in {redact(client.tracking_uri)} (available: {listing})")


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
