"""Warm start (`search.start_from`): an earlier sweep's best configurations, read from MLflow, become the
points this sweep evaluates first (see `dicelab.sweeps.space` for what that means per search algorithm)."""

from __future__ import annotations

from mlflow import MlflowClient
from mlflow.entities import Run

from dicelab.errors import ConfigError
from dicelab.sweeps import records
from dicelab.sweeps.schema import StartFrom
from dicelab.sweeps.space import Point, SweepPlan
from dicelab.sweeps.winner import param_value, rank_configurations, sweep_mode, swept_keys
from dicelab.tracking import conventions as names

WHERE = "config key 'search.start_from'"


def finished_sweep(client: MlflowClient, start: StartFrom, source: str) -> Run:
    """The parent run of the sweep to start from: `start.sweep_id`, else the experiment's newest finished
    one."""
    experiment = client.get_experiment_by_name(start.experiment)
    if experiment is None:
        raise ConfigError(f"{source}: {WHERE}: no experiment {start.experiment!r} in {client.tracking_uri}")
    where = f"tags.`{names.ROLE}` = '{names.ROLE_PARENT}' and attributes.status = '{records.FINISHED}'"
    if start.sweep_id is not None:
        where += f" and tags.`{names.SWEEP_ID}` = '{start.sweep_id}'"
    newest = ["attributes.start_time DESC"]
    parents = client.search_runs([experiment.experiment_id], where, order_by=newest, max_results=1)
    if not parents:
        which = f"sweep {start.sweep_id!r}" if start.sweep_id else "sweep"
        raise ConfigError(f"{source}: {WHERE}: no finished {which} in experiment {start.experiment!r}")
    return parents[0]


def warm_points(client: MlflowClient, start: StartFrom, plan: SweepPlan) -> tuple[list[Point], str]:
    """The best `start.top` configurations of the earlier sweep as points of `plan`, best first, and a line
    saying where they come from."""
    parent = finished_sweep(client, start, plan.source)
    sweep_id = parent.data.tags[names.SWEEP_ID]
    metric = parent.data.tags.get(names.PRIMARY_METRIC)
    runs = records.trial_runs(client, parent.info.experiment_id, sweep_id)
    ranked = rank_configurations(runs, metric, swept_keys(parent), sweep_mode(parent, runs)) if metric else []
    if not ranked:
        raise ConfigError(
            f"{plan.source}: {WHERE}: sweep {sweep_id!r} of {start.experiment!r} has no usable trial"
        )
    points: list[Point] = []
    for configuration in ranked[: start.top]:
        params = {key: param_value(text) for key, text in configuration.best_run.data.params.items()}
        point = plan.warm_point(params)
        if point not in points:
            points.append(point)
    shown = ", ".join(f"{configuration.mean:.4f}" for configuration in ranked[: start.top])
    line = (
        f"warm start: {len(points)} configuration(s) of {start.experiment} sweep {sweep_id} first "
        f"(mean best dev {metric}: {shown})"
    )
    return points, line
