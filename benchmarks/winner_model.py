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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "experiments" / "quickstart.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

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
