"""Write a large sweep (10,000 trials by default) straight into an MLflow SQLite store, and time loading it.

Runs go in with SQLAlchemy bulk inserts into MLflow's own tables (the API would take an hour for 10,000
runs on a laptop); one run is first created through the client so every column MLflow fills is filled
alike. Each trial has the full flattened config as params, the engine's tags and ten evaluations.

    .venv/bin/python tests/analysis/large_experiment.py /tmp/big/mlflow.db --trials 10000
"""

from __future__ import annotations

import argparse
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric, SqlParam, SqlRun, SqlTag
from mlflow.tracking import MlflowClient

from dicelab.config import ExperimentConfig, flatten_config
from dicelab.tracking import conventions as names

LOSSES = {"ce": {}, "focal": {"gamma": 2.0}, "dice": {"gamma": 1.0}, "tversky": {}, "dsc": {"alpha": 0.1}}
VARIANTS = ("original", "+positive", "+negative", "-negative", "+positive+negative")
EVALUATIONS = 10
KEY_VALUE_COLUMNS = ["key", "value", "run_uuid"]  # tags' and params' rows
METRIC_COLUMNS = ["key", "value", "timestamp", "step", "is_nan", "run_uuid"]


def write_large_experiment(
    db_path: Path, experiment: str = "big", trials: int = 10_000, seed: int = 0
) -> None:
    uri = f"sqlite:///{db_path}"
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(
        experiment, artifact_location=(db_path.parent / "artifacts" / experiment).as_uri()
    )
    parent = client.create_run(
        experiment_id,
        tags={names.ROLE: names.ROLE_PARENT, names.SWEEP_NAME: experiment, names.SWEEP_ID: "s1"},
    )
    parent_id = parent.info.run_id
    rng = np.random.default_rng(seed)
    start = int(time.time() * 1000)
    runs, tags, params, metrics, latest = [], [], [], [], []
    configs: dict[tuple[Any, ...], dict[str, Any]] = {}
    for index in range(trials):
        run_id = uuid.uuid4().hex
        loss = list(LOSSES)[index % len(LOSSES)]
        loss_params = dict(LOSSES[loss])
        # Every 25 trials cover loss x variant once; a new block is a new seed (tversky: a new alpha, whose
        # nine values then share a seed), so no configuration repeats a seed.
        variant = VARIANTS[index // len(LOSSES) % len(VARIANTS)]
        seed = index // 25
        if loss == "tversky":  # the Table 10 grid, beta = 1 - alpha
            alpha = round(0.1 + 0.1 * (index // 25 % 9), 1)
            loss_params = {"alpha": alpha, "beta": round(1 - alpha, 1)}
            seed = index // 225
        key = (loss, tuple(sorted(loss_params.items())), variant)
        if key not in configs:  # validated once per configuration: only the seed differs between its trials
            configs[key] = flatten_config(
                ExperimentConfig.model_validate(
                    {"name": experiment, "loss": {"name": loss, **loss_params}, "data": {"variant": variant}}
                )
            )
        flat = {**configs[key], "train.seed": seed}
        failed = rng.random() < 0.02
        runs.append(
            {
                "run_uuid": run_id,
                "name": f"trial-{index}",
                "source_type": "LOCAL",
                "source_name": "",
                "entry_point_name": "",
                "user_id": "bench",
                "status": "FAILED" if failed else "FINISHED",
                "start_time": start + index,
                "end_time": start + index + 60_000,
                "source_version": "",
                "lifecycle_stage": "active",
                "artifact_uri": f"{parent.info.artifact_uri.rsplit('/', 2)[0]}/{run_id}/artifacts",
                "experiment_id": int(experiment_id),
            }
        )
        run_tags = {
            "mlflow.parentRunId": parent_id,
            names.ROLE: names.ROLE_TRIAL,
            names.SWEEP_NAME: experiment,
            names.SWEEP_ID: "s1",
            names.TRIAL_ID: f"trial_{index:05d}",
            names.OUTCOME: names.FAILED if failed else names.COMPLETED,
            names.PRIMARY_METRIC: "f1",
            "mlflow.runName": f"trial-{index}",
        }
        tags += [(k, v, run_id) for k, v in run_tags.items()]
        params += [(k, str(v), run_id) for k, v in flat.items()]
        if failed:
            continue
        curve = 0.8 - 0.2 * np.exp(-np.arange(1, EVALUATIONS + 1) / 3) + rng.normal(0, 0.01, EVALUATIONS)
        for step, value in enumerate(curve, start=1):
            for key, number in (("dev_f1", value), ("train_loss", 1 - value), ("epoch", step / 5)):
                metrics.append(_metric(run_id, key, float(number), step * 100, start))
        for key, number, step in (
            ("dev_f1", curve[-1], EVALUATIONS * 100),
            ("train_loss", 1 - curve[-1], EVALUATIONS * 100),
            ("epoch", EVALUATIONS / 5, EVALUATIONS * 100),
            ("best_dev_f1", curve.max(), 0),
            ("best_step", float(100 * (curve.argmax() + 1)), 0),
        ):
            if key.startswith("best"):
                metrics.append(_metric(run_id, key, float(number), step, start))
            latest.append(_metric(run_id, key, float(number), step, start))
    # sqlite3's executemany on plain tuples, built as tuples: SQLAlchemy's insert builds and processes a
    # parameter dict per row, and even plain dicts turned into tuples took a third of writing 10,000 trials
    # (about a million rows).
    connection = sqlite3.connect(db_path)
    with connection:
        run_columns = list(runs[0])
        for model, columns, rows in (
            (SqlRun, run_columns, [tuple(run[column] for column in run_columns) for run in runs]),
            (SqlTag, KEY_VALUE_COLUMNS, tags),
            (SqlParam, KEY_VALUE_COLUMNS, params),
            (SqlMetric, METRIC_COLUMNS, metrics),
            (SqlLatestMetric, METRIC_COLUMNS, latest),
        ):
            marks = ", ".join("?" * len(columns))
            insert = f"INSERT INTO {model.__tablename__} ({', '.join(columns)}) VALUES ({marks})"
            connection.executemany(insert, rows)
    connection.close()


def _metric(run_id: str, key: str, value: float, step: int, timestamp: int) -> tuple[object, ...]:
    return (key, value, timestamp, step, False, run_id)  # METRIC_COLUMNS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path, help="SQLite file to create")
    parser.add_argument("--trials", type=int, default=10_000)
    args = parser.parse_args(argv)
    args.db.parent.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    write_large_experiment(args.db, trials=args.trials)
    print(f"wrote {args.trials} trials in {time.perf_counter() - began:.1f} s")

    from dicelab.analysis import load_runs

    began, cpu = time.perf_counter(), time.process_time()
    runs = load_runs("big", f"sqlite:///{args.db}")
    took, cpu = time.perf_counter() - began, time.process_time() - cpu
    # CPU time as well: on a shared machine the wall time mostly measures the neighbours.
    print(
        f"load_runs: {len(runs.trials)} trials, {len(runs.param_columns)} params each, "
        f"in {took:.2f} s ({cpu:.2f} s CPU)"
    )


if __name__ == "__main__":
    main()
