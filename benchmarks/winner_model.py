"""What keeping the sweep's winner model (`search.save_model: winner`, the default) costs a quickstart sweep.

    .venv/bin/python benchmarks/winner_model.py                       # experiments/quickstart.yaml
    .venv/bin/python benchmarks/winner_model.py --set search.racing.max_seeds=3   # a shorter race

One run of the sweep, in a fresh directory and MLflow store, through `dicelab.sweep`. Two costs, each against
that run's own wall time (goal: together at most 5%):
- saving: the driver's step after the trials (choosing the winner, reading its trial's last checkpoint,
  logging the MLflow model: weights, tokenizer, config, pyfunc wrapper), as the driver times it;
- the trials' extra checkpoint: a trial's last report carries a checkpoint of its best weights when they are
  newer than its last interval checkpoint (so the driver can save the winner from it). Its cost is measured
  on the winner's own checkpoint payload (torch.save into a new directory, then the copy Tune makes into the
  sweep's storage), median of 5, and counted for every trial, spread over the concurrent trials: an upper
  bound (a trial whose best evaluation was already checkpointed writes nothing more).
Prints one JSON line with the numbers.

    .venv/bin/python benchmarks/winner_model.py --part saving   # no sweep, no Ray: the two costs alone

`--part saving` times the same two steps on the config's first trial's model (initialised, not trained: the
time does not depend on the values) in a fresh SQLite store: `log_model` (median of 3) and the extra
checkpoint, without running the sweep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]


def checkpoint_seconds(state: dict, repeats: int = 5) -> float:
    """Median time to write `state` as a checkpoint directory and copy it to storage, as Tune does."""
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as scratch:
            started = time.perf_counter()
            source = Path(scratch) / "checkpoint"
            source.mkdir()
            torch.save(state, source / "best_model.pt")
            shutil.copytree(source, Path(scratch) / "storage")
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def saving_alone(config_path: Path) -> dict:
    """The model-saving step and the extra checkpoint on the config's first trial's model, without a sweep."""
    from mlflow import MlflowClient

    from dicelab.experiment import load_experiment
    from dicelab.models import log_model
    from dicelab.sweeps.space import outline_sweep
    from dicelab.tasks import TASKS
    from dicelab.training import prepare_inputs

    plan = outline_sweep(load_experiment(config_path), str(config_path))
    point = plan.points()[0]
    config = plan.trial_config(plan.race_seed_point(point, 1) if plan.racing is not None else point)
    inputs = prepare_inputs(config)
    model = TASKS.get(config.task.name)().build_model(config, inputs.label_names, inputs.tokenizer)
    weights = {key: value.detach().clone() for key, value in model.state_dict().items()}
    times = []
    with tempfile.TemporaryDirectory(prefix="dl-bench-") as scratch:
        uri = f"sqlite:///{Path(scratch) / 'mlflow.db'}"
        client = MlflowClient(uri)
        experiment = client.create_experiment("saving", artifact_location=(Path(scratch) / "art").as_uri())
        for _ in range(3):
            run_id = client.create_run(experiment).info.run_id
            started = time.perf_counter()
            log_model(uri, run_id, config, inputs.label_names, inputs.tokenizer_path, weights, step=1)
            times.append(time.perf_counter() - started)
    state = {"best_step": 1, "best_model_state": weights}
    return {
        "config": config_path.name,
        "saving_s": round(statistics.median(times), 3),
        "saving_s_all": [round(t, 3) for t in times],
        "extra_checkpoint_s_per_trial": round(checkpoint_seconds(state), 4),
        "weights_mb": round(sum(t.numel() * t.element_size() for t in weights.values()) / 2**20, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "experiments" / "quickstart.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--part", choices=["sweep", "saving"], default="sweep")
    args = parser.parse_args()
    if args.part == "saving":
        print(json.dumps(saving_alone(Path(args.config).resolve())))
        return

    import dicelab

    config = Path(args.config).resolve()
    with tempfile.TemporaryDirectory(prefix="dl-bench-") as scratch:
        directory = Path(scratch)
        (directory / "ray").mkdir()
        os.environ["RAY_TMPDIR"] = str(directory / "ray")
        os.chdir(directory)
        uri = f"sqlite:///{directory / 'mlflow.db'}"
        result = dicelab.sweep(config, args.overrides, tracking_uri=uri, progress=lambda line: None)
        if result.winner_model_uri is None:
            sys.exit(f"no winner model: {result.warnings}")
        from dicelab.models import load_model

        weights = load_model(result.winner_model_uri, tracking_uri=uri).model.state_dict()
        state = {"best_step": 0, "best_model_state": {k: v.detach().clone() for k, v in weights.items()}}
        per_trial = checkpoint_seconds(state)
    search = yaml.safe_load(config.read_text())["search"]
    concurrent = search.get("max_concurrent") or os.cpu_count() or 1
    trials = len(result.runs)
    wall = result.cost["wall_seconds"]
    saving = result.cost["model_seconds"]
    checkpoints = trials * per_trial / concurrent
    print(
        json.dumps(
            {
                "config": config.name,
                "overrides": args.overrides,
                "trials": trials,
                "sweep_wall_s": round(wall, 2),
                "saving_s": round(saving, 3),
                "extra_checkpoint_s_per_trial": round(per_trial, 4),
                "extra_checkpoints_s": round(checkpoints, 3),
                "saving_share": round(saving / wall, 4),
                "checkpoint_share": round(checkpoints / wall, 4),
                "total_share": round((saving + checkpoints) / wall, 4),
                "weights_mb": round(sum(t.numel() * t.element_size() for t in weights.values()) / 2**20, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
