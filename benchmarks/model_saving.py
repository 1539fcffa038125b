"""What saving a trial's model costs, against the trial itself: the quickstart config's trial (tiny-bert,
1,500 synthetic pairs, 8 epochs), then its best weights saved as an MLflow logged model on its run.

    .venv/bin/python benchmarks/model_saving.py               # 3 repeats, each in a fresh process
    .venv/bin/python benchmarks/model_saving.py --repeats 1 --epochs 2

Each repeat is a fresh process (the first save pays for importing mlflow.pyfunc, as a sweep's driver or a
`dicelab trial` does once): the trial's wall seconds (`run_trial` with an MlflowReporter that does not save),
then `dicelab.models.log_model` twice (first = cold, second = warm), then loading the model back. Printed:
each time and the ratio save / trial in the same process. A sweep saves one model (its winner) at its end:
the share of the sweep is the cold save over the sweep's wall time, which `sweep_overhead.py` measures
(the line "sweep share" estimates it for N trials run two at a time, the quickstart's max_concurrent).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(epochs: int) -> None:
    """In a fresh process: one quickstart trial, two saves and a load; one JSON line of seconds."""
    import torch

    from dicelab.config import apply_overrides, read_yaml
    from dicelab.experiment import experiment_from_dict
    from dicelab.models import load_model, log_model
    from dicelab.tracking import check_tracking
    from dicelab.training import prepare_inputs, run_trial
    from dicelab.training.reporters import MlflowReporter

    torch.set_num_threads(1)  # as a sweep's trial (search.resources.cpu: 1)
    with tempfile.TemporaryDirectory(prefix="model-saving-") as tmp:
        data = read_yaml(ROOT / "experiments" / "quickstart.yaml")
        data.pop("search")
        overrides = [f"train.epochs={epochs}", f"data.cache_dir={tmp}/cache"]
        config = experiment_from_dict(apply_overrides(data, overrides), "model_saving")
        store = f"sqlite:///{tmp}/mlflow.db"
        check_tracking(store)
        inputs = prepare_inputs(config)
        started = time.perf_counter()
        result = run_trial(config, MlflowReporter(store, "model-saving"), inputs=inputs)
        times = {"trial_s": time.perf_counter() - started}
        for name in ("save_cold_s", "save_warm_s"):
            started = time.perf_counter()
            ref = log_model(
                store, str(result.run_id), config, inputs.label_names, inputs.tokenizer_path,
                result.best_model_state, metrics=result.best_metrics, step=result.best_step,
            )  # fmt: skip
            times[name] = time.perf_counter() - started
        started = time.perf_counter()
        load_model(ref.uri, tracking_uri=store)
        times["load_s"] = time.perf_counter() - started
    print(json.dumps(times), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=8, help="the quickstart's 8 by default")
    parser.add_argument("--sweep-trials", type=int, default=24, help="for the sweep-share estimate")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.epochs)
        return
    runs = []
    for repeat in range(args.repeats):
        command = [sys.executable, __file__, "--worker", "--epochs", str(args.epochs)]
        output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout
        runs.append(json.loads(output.strip().splitlines()[-1]))
        run = runs[-1]
        print(
            f"repeat {repeat + 1}: trial {run['trial_s']:.1f} s, save cold {run['save_cold_s']:.2f} s "
            f"({run['save_cold_s'] / run['trial_s']:.1%}), warm {run['save_warm_s']:.2f} s "
            f"({run['save_warm_s'] / run['trial_s']:.1%}), load {run['load_s']:.2f} s",
            flush=True,
        )
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    cold_share = statistics.median(run["save_cold_s"] / run["trial_s"] for run in runs)
    warm_share = statistics.median(run["save_warm_s"] / run["trial_s"] for run in runs)
    print(f"median: trial {median['trial_s']:.1f} s, save cold {median['save_cold_s']:.2f} s, "
          f"warm {median['save_warm_s']:.2f} s, load {median['load_s']:.2f} s")  # fmt: skip
    print(f"save / trial (same process): cold {cold_share:.1%}, warm {warm_share:.1%}")
    sweep_s = args.sweep_trials * median["trial_s"] / 2
    print(
        f"sweep share (estimate: one cold save over {args.sweep_trials} such trials two at a time, "
        f"{sweep_s:.0f} s): {median['save_cold_s'] / sweep_s:.2%}"
    )


if __name__ == "__main__":
    main()
