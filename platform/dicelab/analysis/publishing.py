"""Where a report goes: its folder (an older report swapped out whole, never a foreign folder) and MLflow."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from dicelab.analysis._format import slug
from dicelab.analysis._store import (
    ArtifactUnavailable,
    SqlUnreadable,
    artifact_root,
    client,
    give_up_sql,
    quiet_artifact_transfers,
    reads_sql,
)
from dicelab.analysis.runs import RunSet
from dicelab.errors import DicelabError, TrackingError, first_line
from dicelab.tracking import conventions as names
from dicelab.tracking import lifecycle

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


def default_report_dir(experiment: str) -> Path:
    return Path.cwd() / ".dicelab" / "reports" / slug(experiment)


def check_replaceable(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "report.md").is_file())):
        raise DicelabError(f"{out} exists and is not a dicelab report folder; choose another --out")


def replace_dir(staging: Path, out: Path) -> None:
    """Swap the finished report in; an older report in `out` is removed only once the new one is in place."""
    check_replaceable(out)
    if not out.exists():
        staging.rename(out)
        return
    old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
    out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def log_report(runs: RunSet, out: Path) -> str:
    """Log the report folder under `report/` of the sweep's newest parent run (or the analysis run), through
    MLflow's client (a tracking server's permissions apply).

    Into a parent run of a store read with SQL (`_store.reads_sql`), through the artifact repository of the
    run's root as read with SQL: MLflow's tracking store, which would only look that root up, costs 1.5
    CPU-seconds to open for SQLite, a fifth of a small sweep's `dicelab analyze`."""
    from mlflow.exceptions import MlflowException

    root = _reachable_root(runs)
    try:
        with quiet_artifact_transfers():
            if root is not None:
                from dicelab.tracking import mlflow_adapter

                mlflow_adapter.log_artifacts_at(root, str(out), names.REPORT_DIR)
                return str(runs.report_run)
            mlflow_client = client(runs.tracking_uri)
            run_id = runs.report_run or _analysis_run(mlflow_client, runs.experiment_ids[runs.experiments[0]])
            mlflow_client.log_artifacts(run_id, str(out), artifact_path=names.REPORT_DIR)
    except (MlflowException, OSError) as error:
        why = first_line(error)
        raise TrackingError(f"the report is in {out} but logging it to MLflow failed: {why}") from None
    return run_id


def _reachable_root(runs: RunSet) -> str | None:
    """The parent run's artifact root where SQL reads it and this process reaches it; else None (MLflow's
    client then logs the report, and says why when it cannot)."""
    if not runs.report_run or not reads_sql(runs.tracking_uri):
        return None
    try:
        return artifact_root(runs.tracking_uri, runs.report_run)
    except ArtifactUnavailable:
        return None
    except SqlUnreadable as error:
        give_up_sql(runs.tracking_uri, error)
        return None


def _analysis_run(client: MlflowClient, experiment_id: str) -> str:
    """The experiment's "analysis" run (created once, through its lifecycle) for experiments without a sweep
    parent run."""
    existing = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{names.ROLE}` = '{names.ROLE_ANALYSIS}'",
        max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    if existing:
        return existing[0].info.run_id
    run = lifecycle.start_run(client, experiment_id, lifecycle.Kind.ANALYSIS, run_name="analysis")
    run.send(lifecycle.Event.COMPLETE)
    return run.run_id
