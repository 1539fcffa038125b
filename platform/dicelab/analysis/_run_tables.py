"""An experiment's runs as four long tables (info, tags, params, latest metrics), and metric histories, from
either source (`_store.sql_or_client` chooses):

- MLflow's public client, for every store: `MlflowClient.search_runs`, PAGE_SIZE runs a page following the
  page tokens; a metric's history with `MlflowClient.get_metric_history`, a request per run,
  HISTORY_READERS at once (over HTTP the server's latency is then paid once per batch, not once per run);
- a database URI, by default: read-only SELECTs on MLflow's own tables (`dicelab.tracking.sql_tables`).
  `search_runs` on a SQL store builds an ORM object per param, tag and metric; four flat queries do not.
  A test checks that both sources give the same tables and histories.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import sqlalchemy as sa

from dicelab.analysis._store import client, connection, sql_or_client
from dicelab.errors import TrackingError, first_line
from dicelab.tracking import sql_tables
from dicelab.tracking.store import redact

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

# Runs per search_runs page: each page is one request, answered in one go. A 5,000-run page took the loaded
# 2-core server minutes, longer than its workers lived between restarts there.
PAGE_SIZE = 500
_RUN_IDS_PER_QUERY = 500  # keeps IN (...) lists under every database's bound-parameter limit
HISTORY_READERS = 8  # metric histories read at once, one run each


@dataclass
class RunTables:
    info: pd.DataFrame  # run_id, run_name, status, start_time, end_time (epoch milliseconds)
    tags: pd.DataFrame  # run_id, key, value
    params: pd.DataFrame  # run_id, key, value (text, as MLflow stores params)
    metrics: pd.DataFrame  # run_id, key, value (latest value of each metric)


def read_run_tables(
    uri: str, experiment_id: str, on_runs: Callable[[int], None] = lambda n: None
) -> RunTables:
    """The active runs of one experiment; `on_runs` is told how many are read so far."""

    def sql() -> RunTables:
        tables = _read_sql(uri, experiment_id)
        on_runs(len(tables.info))
        return tables

    return sql_or_client(uri, sql, lambda: _read_api(client(uri), experiment_id, on_runs))


def read_histories(uri: str, run_ids: Sequence[str], key: str) -> pd.DataFrame:
    """Every logged value of metric `key` for `run_ids`: columns run_id, step, value."""
    return sql_or_client(
        uri, lambda: _histories_sql(uri, run_ids, key), lambda: _histories_api(client(uri), run_ids, key)
    )


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

    def one(run_id: str) -> list[tuple[str, int, float]]:
        try:
            points = client.get_metric_history(run_id, key)
        except MlflowException as error:
            raise TrackingError(f"cannot read {key} of run {run_id}: {first_line(error)}") from None
        return [(run_id, int(point.step), float(point.value)) for point in points]

    with ThreadPoolExecutor(HISTORY_READERS) as pool:
        rows = [row for points in pool.map(one, run_ids) for row in points]
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
            raise TrackingError(
                f"cannot search runs in {redact(client.tracking_uri)}: {first_line(error)}"
            ) from None
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
