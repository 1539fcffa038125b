"""Links into the MLflow UI: a sweep's runs, best first, and which sweep to show when none is named."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from dicelab.errors import TrackingError
from dicelab.tracking import conventions as names

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Experiment, Run


# The UI's "GenAI | Model training" switch: the URL's choice wins over the one the browser remembers.
TRAINING_VIEW = "workflowType=machine_learning"


def experiment_url(base: str, experiment_id: str, metric: str | None = None) -> str:
    """The experiment's runs table in the "Model training" view; with `metric` (e.g. "f1") sorted by
    best_dev_<metric>, best first, so that the chart view (which draws the first 10 runs) shows the best."""
    url = f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{TRAINING_VIEW}"
    if metric:
        key = quote(f"metrics.`{names.best_metric(metric)}`", safe="")
        url += f"&orderByKey={key}&orderByAsc=false"
    return url


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{TRAINING_VIEW}"


def sweep_metric(client: MlflowClient, experiment_id: str) -> str | None:
    """The metric the experiment's newest sweep selected on (its parent run's tag), if any."""
    parent = _newest_parent(client, [experiment_id])
    return parent.data.tags.get(names.PRIMARY_METRIC) if parent is not None else None


def find_experiment(client: MlflowClient, name: str | None) -> Experiment | None:
    """Experiment `name` (a TrackingError naming the available ones when missing); with no name, the
    experiment of the newest sweep in the store, or None when the store has no sweep."""
    from mlflow.entities import ViewType

    if name is not None:
        experiment = client.get_experiment_by_name(name)
        if experiment is None or experiment.lifecycle_stage != "active":
            available = sorted(e.name for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY))
            listing = ", ".join(available) or "none"
            raise TrackingError(f"no experiment {name!r} in {client.tracking_uri} (available: {listing})")
        return experiment
    ids = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)]
    parent = _newest_parent(client, ids) if ids else None
    return client.get_experiment(parent.info.experiment_id) if parent is not None else None


def _newest_parent(client: MlflowClient, experiment_ids: list[str]) -> Run | None:
    runs = client.search_runs(
        experiment_ids,
        filter_string=f"tags.`{names.ROLE}` = '{names.ROLE_PARENT}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return runs[0] if runs else None
