"""An experiment's runs as four long tables (info, tags, params, latest metrics), from either source:

- a SQL-backed store (SQLite, PostgreSQL, MySQL, MSSQL): read-only SELECTs on MLflow's own tables, using
  MLflow's SQLAlchemy table definitions. `search_runs` builds an ORM object per param, tag and metric,
  which grows slow at thousands of runs (docs/performance.md has the figures); four flat queries do not.
  A test checks that both sources give the same tables.
- any other store (an `http://` tracking server): `MlflowClient.search_runs`, 500 runs a page; metric
  histories with the REST API's `metrics/get-history-bulk-interval`, 100 runs a request (a request per run
  made the histories the largest part of analysing a large sweep over HTTP; docs/performance.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import sqlalchemy as sa

from dicelab.analysis._store import client, connection, is_sql_store
from dicelab.errors import TrackingError, first_line
from dicelab.tracking import sql_tables
from dicelab.tracking.store import redact

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

# Runs per search_runs page: each page is one request, answered in one go. A 5,000-run page took the loaded
# 2-core server minutes, longer than its workers lived between restarts there (docs/performance.md).
PAGE_SIZE = 500
_RUN_IDS_PER_QUERY = 500  # keeps IN (...) lists under every database's bound-parameter limit
_HISTORY_ENDPOINT = "/api/2.0/mlflow/metrics/get-history-bulk-interval"
_RUN_IDS_PER_REQUEST = 100  # the server's limit for that endpoint
# Its limit of points per run and metric: a longer history comes back evenly sampled, first and last kept
# (training curves have a point per evaluation, far fewer).
_POINTS_PER_RUN = 2500


@dataclass
class RunTables:
    info: pd.DataFrame  # run_id, run_name, status, start_time, end_time (epoch milliseconds)
    tags: pd.DataFrame  # run_id, key, value
    params: pd.DataFrame  # run_id, key, value (text, as MLflow stores params)
    metrics: pd.DataFrame  # run_id, key, value (latest value of each metric)


def read_run_tables(
    uri: str, experiment_id: str, on_runs: Callable[[int], None] = lambda n: None
) -> RunTables:
    """The active runs of one experiment."""
    if is_sql_store(uri):
        tables = _read_sql(uri, experiment_id)
        on_runs(len(tables.info))
        return tables
    return _read_api(client(uri), experiment_id, on_runs)


def read_histories(uri: str, run_ids: Sequence[str], key: str) -> pd.DataFrame:
    """Every logged value of metric `key` for `run_ids`: columns run_id, step, value."""
    if is_sql_store(uri):
        return _histories_sql(uri, run_ids, key)
    return _histories_api(client(uri), run_ids, key)


def _histories_sql(uri: str, run_ids: Sequence[str], key: str) -> pd.DataFrame:
    metric = sql_tables.METRICS.c
    frames = []
    with connection(uri) as opened:
        for chunk in _chunks(run_ids):
            query = sa.select(
                metric.run_uuid.label("run_id"), metric.step, metric.value, metric.is_nan
            ).where(metric.key == key, metric.run_uuid.in_(chunk))
            frames.append(pd.read_sql(query, opened))
    history = pd.concat(frames) if frames else pd.DataFrame(columns=["run_id", "step", "value", "is_nan"])
    return _nan_where_flagged(history).drop(columns="is_nan")


def _histories_api(client: MlflowClient, run_ids: Sequence[str], key: str) -> pd.DataFrame:
    from mlflow.exceptions import MlflowException

    from dicelab.tracking import mlflow_adapter

    rows = []
    for chunk in _chunks(run_ids, _RUN_IDS_PER_REQUEST):
        try:
            points = mlflow_adapter.rest_get(
                client.tracking_uri,
                _HISTORY_ENDPOINT,
                {"run_ids": list(chunk), "metric_key": key, "max_results": _POINTS_PER_RUN},
            ).get("metrics", [])
        except MlflowException as error:
            raise TrackingError(f"cannot read {key} of {len(chunk)} runs: {first_line(error)}") from None
        # the JSON writes NaN and infinities as strings ("NaN", "Infinity"), which float() reads
        rows += [(point["run_id"], int(point.get("step", 0)), float(point["value"])) for point in points]
    return pd.DataFrame(rows, columns=["run_id", "step", "value"])


def _read_sql(uri: str, experiment_id: str) -> RunTables:
    runs = sql_tables.RUNS
    run = runs.c
    active = sa.and_(run.experiment_id == int(experiment_id), run.lifecycle_stage == sql_tables.ACTIVE)

    def keyed(table: sa.Table, *extra: sa.ColumnElement) -> sa.Select:
        columns = table.c
        return (
            sa.select(columns.run_uuid.label("run_id"), columns.key, columns.value, *extra)
            .join(runs, columns.run_uuid == run.run_uuid)
            .where(active)
        )

    with connection(uri) as opened:
        info = pd.read_sql(
            sa.select(
                run.run_uuid.label("run_id"),
                run.name.label("run_name"),
                run.status,
                run.start_time,
                run.end_time,
            ).where(active),
            opened,
        )
        tags = pd.read_sql(keyed(sql_tables.TAGS), opened)
        params = pd.read_sql(keyed(sql_tables.PARAMS), opened)
        latest = sql_tables.LATEST_METRICS
        metrics = pd.read_sql(keyed(latest, latest.c.is_nan), opened)
    return RunTables(info, tags, params, _nan_where_flagged(metrics).drop(columns="is_nan"))


def _read_api(client: MlflowClient, experiment_id: str, on_runs: Callable[[int], None]) -> RunTables:
    from mlflow.entities import ViewType
    from mlflow.exceptions import MlflowException

    info, tags, params, metrics = [], [], [], []
    token: str | None = None
    while True:
        try:
            page = client.search_runs(
                [experiment_id], run_view_type=ViewType.ACTIVE_ONLY, max_results=PAGE_SIZE, page_token=token
            )
        except MlflowException as error:
            raise TrackingError(f"cannot search runs in {redact(client.tracking_uri)}: {error}") from None
        for run in page:
            run_id = run.info.run_id
            info.append((run_id, run.info.run_name, run.info.status, run.info.start_time, run.info.end_time))
            tags += [(run_id, key, value) for key, value in run.data.tags.items()]
            params += [(run_id, key, value) for key, value in run.data.params.items()]
            metrics += [(run_id, key, value) for key, value in run.data.metrics.items()]
        on_runs(len(info))
        token = page.token
        if not token:
            break
    keyed = ["run_id", "key", "value"]
    return RunTables(
        pd.DataFrame(info, columns=["run_id", "run_name", "status", "start_time", "end_time"]),
        pd.DataFrame(tags, columns=keyed),
        pd.DataFrame(params, columns=keyed),
        pd.DataFrame(metrics, columns=keyed),
    )


def _nan_where_flagged(frame: pd.DataFrame) -> pd.DataFrame:
    # MLflow stores a NaN metric as value 0 with is_nan set (its API turns it back into NaN).
    return frame.assign(value=frame["value"].where(~frame["is_nan"].astype(bool), math.nan))


def _chunks(items: Sequence[str], size: int = _RUN_IDS_PER_QUERY) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
