"""Links into the MLflow UI: a sweep's runs, best first, and which sweep to show when none is named.

A URL of MLflow 3's runs table carries only its search facets (searchFilter, orderByKey, orderByAsc,
startTime, lifecycleFilter, modelVersionFilter, datasetsFilter); the columns shown are UI state the browser
keeps. A "shared view" carries both: an experiment tag `mlflow.sharedViewState.<key>` holding the state as
JSON, opened by `?viewStateShareKey=<key>` (what the UI's Share button writes). `trials_view_url` writes one:
trials only (the parent runs filtered out), best first, the metric and the swept parameters as columns.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import quote

from dicelab.errors import TrackingError
from dicelab.tracking import conventions as names

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Experiment, Run


# The UI's "GenAI | Model training" switch: the URL's choice wins over the one the browser remembers.
TRAINING_VIEW = "workflowType=machine_learning"
SHARED_VIEW_TAG = "mlflow.sharedViewState."  # + the share key: an experiment tag read by MLflow's UI
TRIALS_VIEW_KEY = "dicelab-trials"


def experiment_url(base: str, experiment_id: str, metric: str | None = None) -> str:
    """The experiment's runs table in the "Model training" view; with `metric` (e.g. "f1") sorted by
    best_dev_<metric>, best first, so that the chart view (which draws the first 10 runs) shows the best."""
    url = f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{TRAINING_VIEW}"
    if metric:
        key = quote(f"metrics.`{names.best_metric(metric)}`", safe="")
        url += f"&orderByKey={key}&orderByAsc=false"
    return url


def trials_view_url(
    client: MlflowClient, base: str, experiment_id: str, metric: str | None, params: list[str]
) -> str:
    """Tag the experiment with a shared view of its trials (parents filtered out; best first when `metric`
    is given; the metric and the `params` as columns) and return the URL that opens it."""
    state: dict[str, object] = {"searchFilter": f"tags.`{names.ROLE}` = '{names.ROLE_TRIAL}'"}
    columns = [f"params.`{param}`" for param in params]
    if metric:
        best = names.best_metric(metric)
        state |= {"orderByKey": f"metrics.`{best}`", "orderByAsc": False}
        columns = [f"metrics.`{best}`", *columns]
    state["selectedColumns"] = ["attributes.`Duration`", *columns]
    client.set_experiment_tag(experiment_id, SHARED_VIEW_TAG + TRIALS_VIEW_KEY, json.dumps(state))
    return (
        f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{TRAINING_VIEW}"
        f"&viewStateShareKey={TRIALS_VIEW_KEY}"
    )


def swept_params(client: MlflowClient, experiment_id: str) -> list[str]:
    """The parameters that differ between the trials of the experiment's newest sweep (what it searched,
    seeds included), sorted; none when the store has no sweep."""
    parent = _newest_parent(client, [experiment_id])
    if parent is None:
        return []
    sweep_id = parent.data.tags.get(names.SWEEP_ID)
    of_the_sweep = f"tags.`{names.ROLE}` = '{names.ROLE_TRIAL}' and tags.`{names.SWEEP_ID}` = '{sweep_id}'"
    trials = client.search_runs(
        [experiment_id],
        filter_string=of_the_sweep,
        max_results=1000,
    )
    keys = set().union(*(run.data.params for run in trials)) if trials else set()
    return sorted(k for k in keys if len({run.data.params.get(k) for run in trials}) > 1)


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
