"""Scale of a team's tracking store: 10,000 trial runs across 20 sweeps in PostgreSQL, and `dicelab analyze`
of one sweep of 100 / 1,000 / 5,000 runs over HTTP and with the database URI.

    .venv/bin/python benchmarks/tracking_scale.py [--out results.json]

Starts a team server (dicelab.tracking.team_server: PostgreSQL 15 + `mlflow server` with basic auth) in a
temp dir, writes the store in bulk (one create_run + one log_batch per run, straight into PostgreSQL through
MLflow's SQL store, 4 writer threads), then times, for each of the three sweeps and both sources:
- load:    `load_runs` (what `dicelab analyze` reads: runs, tags, params, latest metrics), split into
           store (reading from MLflow) and tables (pandas assembly);
- analyze: the whole `analyze_experiment` (load + curves, tables, tests, the report files; not logged back).
Goals: the 1,000-run analysis <= 30 s over HTTP, <= 5 s with the database URI; time per run not growing with
the sweep's size (ratios printed). Each run looks like a dicelab trial: 32 params, 10 tags, 3 evaluations of
6 dev metrics plus train loss, and the final best_dev_* metrics.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

from dicelab.analysis import _run_tables
from dicelab.analysis.analyze import analyze_experiment
from dicelab.analysis.runs import load_runs
from dicelab.tracking import conventions as names
from dicelab.tracking import team_server

MEASURED = (100, 1_000, 5_000)  # the sweeps timed; the other 17 fill the store to TOTAL_RUNS
TOTAL_RUNS = 10_000
SWEEPS = 20
LOSSES = ("ce", "focal", "dice", "dsc", "tversky")
DEV_METRICS = ("f1", "precision", "recall", "accuracy", "loss", "pos_rate")
EVALUATIONS = 3
WRITERS = 4


def sweep_sizes() -> list[int]:
    rest = SWEEPS - len(MEASURED)
    left = TOTAL_RUNS - sum(MEASURED)
    return [*MEASURED, *(left // rest + (1 if i < left % rest else 0) for i in range(rest))]


def trial_records(
    index: int, sweep_id: str, parent_id: str
) -> tuple[list[Param], list[RunTag], list[Metric]]:
    """What a dicelab trial logs, with made-up values (deterministic in `index`)."""
    loss = LOSSES[index % len(LOSSES)]
    seed = index // len(LOSSES)
    params = {
        "loss.name": loss,
        "loss.alpha": str(0.1 * (index % 7)),
        "loss.gamma": "1.0",
        "loss.smoothing": "1.0",
        "loss.class_reduction": "mean",
        "loss.level": "example",
        "train.seed": str(seed),
        "train.learning_rate": "0.001",
        "train.epochs": str(EVALUATIONS),
        "train.batch_size": "16",
        "train.metric": "f1",
        "train.warmup_ratio": "0.1",
        "train.weight_decay": "0.01",
        "train.max_grad_norm": "1.0",
        "train.precision": "fp32",
        "train.patience": "None",
        "data.source": "synthetic_pairs",
        "data.variant": "original",
        "data.max_length": "128",
        "data.synthetic.n_train": "1000",
        "data.synthetic.n_dev": "200",
        "model.backbone": "tiny-bert",
        "model.dropout": "0.1",
        "model.pooling": "cls",
        "task.name": "pair_classification",
        "search.algorithm": "grid",
        "search.max_concurrent": "2",
        "tracking.log_predictions": "False",
        "resources.cpu": "1",
        "resources.gpu": "0",
        "name": "scale",
        "experiment.kind": "sweep",
    }
    tags = {
        names.ROLE: names.ROLE_TRIAL,
        "mlflow.parentRunId": parent_id,
        names.SWEEP_NAME: "scale",
        names.SWEEP_ID: sweep_id,
        names.TRIAL_ID: f"trial_{index:05d}",
        names.OUTCOME: names.COMPLETED,
        names.PRIMARY_METRIC: "f1",
        names.GIT_COMMIT: "0" * 40,
        names.DATA_FINGERPRINT: "f" * 16,
        "mlflow.runName": f"trial_{index:05d}",
    }
    now = int(time.time() * 1000)
    base = 0.6 + 0.05 * LOSSES.index(loss) + 0.01 * ((index * 7919) % 11)
    metrics = []
    for step in range(1, EVALUATIONS + 1):
        for metric in DEV_METRICS:
            metrics.append(Metric(f"dev_{metric}", base + 0.01 * step, now + step, step))
        metrics.append(Metric(names.TRAIN_LOSS, 1.0 / step, now + step, step))
    metrics += [Metric(f"best_dev_{metric}", base + 0.03, now + 9, EVALUATIONS) for metric in DEV_METRICS]
    return (
        [Param(key, value) for key, value in params.items()],
        [RunTag(key, value) for key, value in tags.items()],
        metrics,
    )


def write_store(database_uri: str) -> dict[str, Any]:
    """The 20 sweeps, straight into PostgreSQL (MLflow's SQL store); returns sizes and write rate."""
    client = MlflowClient(database_uri)
    started = time.perf_counter()
    written = 0
    sweeps = []
    for number, size in enumerate(sweep_sizes()):
        name = f"scale-{number:02d}-{size}"
        experiment_id = client.create_experiment(name)
        sweep_id = secrets.token_hex(4)
        parent = client.create_run(
            experiment_id,
            run_name="sweep",
            tags={names.ROLE: names.ROLE_PARENT, names.SWEEP_NAME: "scale", names.SWEEP_ID: sweep_id},
        )
        client.set_terminated(parent.info.run_id)

        def one(
            index: int,
            experiment_id: str = experiment_id,
            sweep_id: str = sweep_id,
            parent_id: str = parent.info.run_id,
        ) -> None:
            params, tags, metrics = trial_records(index, sweep_id, parent_id)
            run = client.create_run(experiment_id, run_name=f"trial_{index:05d}")
            client.log_batch(run.info.run_id, metrics=metrics, params=params, tags=tags)
            client.set_terminated(run.info.run_id)

        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(one, range(size)))
        written += size
        sweeps.append({"name": name, "runs": size})
        print(
            f"  wrote {name}: {written:,} runs, {written / (time.perf_counter() - started):.0f} runs/s",
            flush=True,
        )
    seconds = time.perf_counter() - started
    return {
        "sweeps": sweeps,
        "runs": written,
        "write_s": round(seconds, 1),
        "runs_per_s": round(written / seconds),
    }


def time_load(experiment: str, uri: str) -> dict[str, float]:
    """load_runs, and the part of it spent reading the store (read_run_tables)."""
    spent = {"store": 0.0}
    read = _run_tables.read_run_tables

    def timed_read(*args: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter()
        try:
            return read(*args, **kwargs)
        finally:
            spent["store"] += time.perf_counter() - begin

    import dicelab.analysis.runs as runs_module

    runs_module.read_run_tables = timed_read
    try:
        begin = time.perf_counter()
        runs = load_runs(experiment, uri)
        total = time.perf_counter() - begin
    finally:
        runs_module.read_run_tables = read
    assert len(runs.trials) > 0
    return {
        "load_s": round(total, 2),
        "store_s": round(spent["store"], 2),
        "tables_s": round(total - spent["store"], 2),
    }


def time_analyze(experiment: str, uri: str, out: Path) -> float:
    begin = time.perf_counter()
    analyze_experiment(experiment, uri, out=out, log_to_mlflow=False)
    return round(time.perf_counter() - begin, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    parser.add_argument(
        "--quick", action="store_true", help="a 400-run store, sweeps of 20 / 50 / 100: a smoke run"
    )
    args = parser.parse_args()
    if args.quick:
        global MEASURED, TOTAL_RUNS
        MEASURED, TOTAL_RUNS = (20, 50, 100), 400
    figures: dict[str, Any] = {"machine": os.uname().nodename, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="dl-scale-") as reports:
        run_benchmark(figures, Path(reports))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
    print(json.dumps({key: value for key, value in figures.items() if key != "store"}, indent=2))
    return 0


def run_benchmark(figures: dict[str, Any], directory: Path) -> None:
    password = secrets.token_urlsafe(18)
    os.environ.update(MLFLOW_TRACKING_USERNAME="admin", MLFLOW_TRACKING_PASSWORD=password)
    server_dir = Path(tempfile.mkdtemp(prefix="dl-scale-db-", dir="/tmp"))  # reachable by the postgres user
    with team_server.running(server_dir, ("admin", password)) as server:
        os.environ["PGPASSFILE"] = str(server.pgpass)
        print(f"writing {TOTAL_RUNS:,} runs in {SWEEPS} sweeps into PostgreSQL", flush=True)
        figures["store"] = write_store(server.database_uri)
        rows = []
        for size, sweep in zip(MEASURED, figures["store"]["sweeps"], strict=False):
            for source, uri in (("http", server.tracking_uri), ("database", server.database_uri)):
                row = {"runs": size, "source": source, **time_load(sweep["name"], uri)}
                row["analyze_s"] = time_analyze(sweep["name"], uri, directory / f"report-{size}-{source}")
                row["load_ms_per_run"] = round(1000 * row["load_s"] / size, 2)
                rows.append(row)
                print(json.dumps(row), flush=True)
        figures["analyze"] = rows
    for source in ("http", "database"):
        own = {row["runs"]: row for row in rows if row["source"] == source}
        growth = {
            f"{small}->{large}": round((own[large]["load_s"] / own[small]["load_s"]) / (large / small), 2)
            for small, large in itertools.pairwise(MEASURED)
        }
        figures[f"{source}_load_growth_per_run"] = growth  # 1.0: linear; above 1: faster than linear
        print(f"{source}: load time per run, ratio of larger to smaller sweep: {growth}")


if __name__ == "__main__":
    sys.exit(main())
