"""Sweep overhead: `dicelab sweep` against the same trials in plain processes, and against Hugging Face
`Trainer.hyperparameter_search(backend="ray")`; then ASHA against the full grid on the Tversky alpha sweep.

    .venv/bin/python benchmarks/sweep_overhead.py            # everything (about 15 minutes on 2 cores)
    .venv/bin/python benchmarks/sweep_overhead.py --part overhead | packing | asha

Overhead: 8 trials (4 learning rates x 2 seeds) of one fixed workload (tiny-bert on 1,500 synthetic pairs,
12 epochs: about 12 s per trial, two trials at a time on 2 cores), each way timed end to end as a fresh
process:
- sweep:    `dicelab sweep` at its defaults (local Ray, Tune, checkpoints every
            `search.checkpoint_interval_s`, MLflow parent + child runs),
- plain:    the same 8 `run_trial` calls with the same MLflow reporter in a pool of 2 worker processes,
- hf:       `Trainer.hyperparameter_search(backend="ray")`, same model size, data, space and epochs.
sweep and plain alternate (--repeats pairs, each in a fresh directory and MLflow store). Each is split into
start-up (launch to the first trial's MLflow run), trials (first run's start to last run's end) and shut-down,
from the runs' recorded start and end times: where the extra seconds go. Goal: sweep / plain <= 1.05.
`--concurrent 1` runs one trial at a time both ways, leaving a core to Ray's processes and the driver.
`--compare-malloc` adds a third way to each repeat: the sweep with glibc's default malloc arenas in its
workers (`MALLOC_ARENA_MAX` at glibc's own limit), i.e. without `dicelab.sweeps.trial_env`.

Packing: the same sweep as 2 trials x 1 thread (search.resources.cpu 1, the default) and as 1 trial x
2 threads (cpu 2; a trial's torch threads follow its CPUs), alternating --repeats times: trial-epochs per
hour.

ASHA: the named space `tversky_alpha` (9 trials of 10 epochs; batch-level Tversky, learning rate 1e-3, as
in the quickstart), full grid (FIFO) against ASHA (grace period 1 evaluation, reduction factor 2):
trial-epochs trained and the best dev F1 found.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import yaml

BIN = Path(sys.executable).parent
WORKLOAD: dict[str, Any] = {
    "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 1500, "n_dev": 500}, "max_length": 64},
    "model": {"backbone": "tiny-bert"},
    "loss": {"name": "ce"},
    "train": {"epochs": 5, "batch_size": 32, "learning_rate": 3.0e-3, "metric": "f1"},
    "tracking": {"log_predictions": False},
}
LEARNING_RATES = [1.0e-3, 2.0e-3, 3.0e-3, 5.0e-3]
SEEDS = [1, 2]
CONCURRENT = 2


def sweep_config(
    name: str, search: dict[str, Any], epochs: int, concurrent: int = CONCURRENT, **changes: dict[str, Any]
) -> dict[str, Any]:
    config = {"name": name, **json.loads(json.dumps(WORKLOAD))}
    config["train"]["epochs"] = epochs
    for section, values in changes.items():
        config[section] = {**config.get(section, {}), **values}
    config["search"] = {"resources": {"cpu": 1}, "max_concurrent": concurrent, **search}
    return config


def overhead_config(epochs: int, concurrent: int = CONCURRENT) -> dict[str, Any]:
    space = {"space": {"train.learning_rate": {"grid": LEARNING_RATES}}, "seeds": SEEDS}
    return sweep_config("bench-overhead", space, epochs, concurrent)


def timed(args: list[str], cwd: Path) -> float:
    return timed_span(args, cwd)[2]


def timed_span(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run a command that must succeed: (clock time at launch, clock time at exit, wall seconds)."""
    launched, started = time.time(), time.perf_counter()
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return launched, time.time(), seconds


def phases(workdir: Path, experiment: str, launched: float, exited: float) -> dict[str, float]:
    """Where a timed command's seconds went, from its trial runs' MLflow start and end times: start-up
    (launch to the first trial's run), trials (first run's start to last run's end), shut-down (to exit),
    and the mean seconds per trial run."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{workdir / '.dicelab' / 'mlflow.db'}")
    found = client.get_experiment_by_name(experiment)
    runs = [
        run for run in client.search_runs([found.experiment_id]) if run.data.tags.get("mlflow.parentRunId")
    ]
    runs = runs or client.search_runs([found.experiment_id])  # plain trials have no parent run
    starts = [run.info.start_time / 1000 for run in runs]
    ends = [run.info.end_time / 1000 for run in runs]
    return {
        "start_up_s": round(min(starts) - launched, 1),
        "trials_s": round(max(ends) - min(starts), 1),
        "shut_down_s": round(exited - max(ends), 1),
        "mean_trial_run_s": round(sum(e - s for s, e in zip(starts, ends, strict=True)) / len(runs), 1),
    }


# -- the plain baseline: run_trial in a pool of worker processes ------------------------------------------


def _plain_trial(config_data: dict[str, Any], inputs: Any, uri: str) -> float:
    import torch

    from dicelab.experiment import experiment_from_dict
    from dicelab.training import run_trial
    from dicelab.training.reporters import MlflowReporter

    torch.set_num_threads(1)
    config = experiment_from_dict(config_data, "plain")
    result = run_trial(config, MlflowReporter(uri, "bench-plain"), inputs=inputs)
    return result.best_metrics.get("f1", float("nan"))


def run_plain(config_path: Path) -> None:
    from dicelab.config import config_to_dict
    from dicelab.experiment import load_experiment
    from dicelab.sweeps.space import plan_sweep
    from dicelab.tracking import check_tracking, default_tracking_uri
    from dicelab.training import prepare_inputs

    plan = plan_sweep(load_experiment(config_path), str(config_path))
    configs = [plan.trial_config(point) for point in plan.points()]
    uri = default_tracking_uri()
    check_tracking(uri)
    inputs = prepare_inputs(configs[0])
    at_once = plan.search.max_concurrent or CONCURRENT  # as many trials at once as the sweep runs
    with ProcessPoolExecutor(at_once, mp_context=get_context("spawn")) as pool:
        jobs = [pool.submit(_plain_trial, config_to_dict(config), inputs, uri) for config in configs]
        print(json.dumps({"f1": [job.result() for job in jobs]}))


# -- Hugging Face Trainer.hyperparameter_search(backend="ray") --------------------------------------------


def run_hf(config_path: Path) -> None:
    import torch
    from ray import tune
    from transformers import (
        BertForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    from dicelab.experiment import load_experiment
    from dicelab.tasks.backbones import build_encoder
    from dicelab.training import prepare_inputs

    torch.set_num_threads(1)
    config = load_experiment(config_path)
    inputs = prepare_inputs(config)
    tokenizer = inputs.tokenizer
    encoder_config = build_encoder(config.model, tokenizer, max_positions=config.data.max_length).config
    encoder_config.num_labels = len(inputs.label_names)

    def model_init(trial: Any = None) -> BertForSequenceClassification:
        return BertForSequenceClassification(encoder_config)

    def f1(prediction: Any) -> dict[str, float]:
        from sklearn.metrics import f1_score

        return {"f1": float(f1_score(prediction.label_ids, prediction.predictions.argmax(-1)))}

    train = config.train
    args = TrainingArguments(
        output_dir=str(Path.cwd() / "hf"),
        num_train_epochs=train.epochs,
        per_device_train_batch_size=train.batch_size,
        per_device_eval_batch_size=train.eval_batch_size,
        learning_rate=train.learning_rate,
        weight_decay=train.weight_decay,
        warmup_steps=train.warmup_ratio,  # a float below 1 is a ratio of the total steps
        max_grad_norm=train.max_grad_norm,
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=1,
        logging_strategy="epoch",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model_init=model_init,
        args=args,
        train_dataset=inputs.train_features,
        eval_dataset=inputs.dev_features,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=f1,
    )
    best = trainer.hyperparameter_search(
        hp_space=lambda _: {
            "learning_rate": tune.grid_search(LEARNING_RATES),
            "seed": tune.grid_search(SEEDS),
        },
        compute_objective=lambda metrics: metrics["eval_f1"],
        n_trials=1,  # one pass over the grid: 8 trials
        direction="maximize",
        backend="ray",
        resources_per_trial={"cpu": 1},
        max_concurrent_trials=config.search.max_concurrent or CONCURRENT,
        storage_path=str(Path.cwd() / "hf_ray_results"),
        verbose=0,
    )
    print(json.dumps({"best_f1": best.objective}))


# -- ASHA against the full grid -----------------------------------------------------------------------------


def trial_epochs_and_best(workdir: Path, experiment: str) -> tuple[float, float, int]:
    from mlflow import MlflowClient

    from dicelab.tracking import conventions as names

    client = MlflowClient(f"sqlite:///{workdir / '.dicelab' / 'mlflow.db'}")
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id], f"tags.`{names.ROLE}` = '{names.ROLE_TRIAL}'")
    epochs = sum(max(p.value for p in client.get_metric_history(r.info.run_id, "epoch")) for r in runs)
    best = max(run.data.metrics.get("best_dev_f1", 0.0) for run in runs)
    stopped = sum(run.data.tags.get(names.OUTCOME) == names.EARLY_STOPPED for run in runs)
    return epochs, best, stopped


def asha_part(workdir: Path, epochs: int) -> dict[str, Any]:
    results = {}
    for scheduler in ("fifo", "asha"):
        name = f"bench-tversky-{scheduler}"
        search: dict[str, Any] = {"spaces": ["tversky_alpha"], "scheduler": {"name": scheduler}}
        if scheduler == "asha":
            search["scheduler"].update(grace_period=1, reduction_factor=2)
        path = workdir / f"{name}.yaml"
        tversky = {"loss": {"name": "tversky", "level": "batch"}, "train": {"learning_rate": 1.0e-3}}
        path.write_text(yaml.safe_dump(sweep_config(name, search, epochs, **tversky)))
        seconds = timed([str(BIN / "dicelab"), "sweep", str(path)], workdir)
        trial_epochs, best, stopped = trial_epochs_and_best(workdir, name)
        results[scheduler] = {
            "wall_s": round(seconds, 1),
            "trial_epochs": round(trial_epochs, 2),
            "best_dev_f1": round(best, 4),
            "early_stopped": stopped,
        }
        print(f"{scheduler}: {results[scheduler]}", flush=True)
    return results


def overhead_part(
    workdir: Path,
    epochs: int,
    repeats: int,
    with_hf: bool,
    concurrent: int = CONCURRENT,
    compare_malloc: bool = False,
) -> dict[str, Any]:
    """plain and sweep alternate `repeats` times (each in its own directory and MLflow store); with
    `compare_malloc` a third way, the sweep with glibc's default malloc arenas in its workers."""
    me = str(Path(__file__).resolve())
    env_python = str(BIN / "python")
    sweep = [str(BIN / "dicelab"), "sweep"]
    commands: dict[str, tuple[list[str], str, dict[str, str]]] = {
        "plain": ([env_python, me, "--worker", "plain"], "bench-plain", {}),
        "sweep": (sweep, "bench-overhead", {}),
    }
    if compare_malloc:  # glibc's own limit (8 arenas per core): as if dicelab set nothing (trial_env)
        default = {"MALLOC_ARENA_MAX": str(8 * (os.cpu_count() or 1))}
        commands["sweep, default malloc"] = (sweep, "bench-overhead", default)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for repeat in range(repeats):
        for index, (name, (command, experiment, env)) in enumerate(commands.items()):
            directory = workdir / f"overhead-{repeat}-{index}"
            directory.mkdir()
            path = directory / "overhead.yaml"
            path.write_text(yaml.safe_dump(overhead_config(epochs, concurrent)))
            launched, exited, seconds = timed_span([*command, str(path)], directory, env)
            runs[name].append(
                {"wall_s": round(seconds, 1), **phases(directory, experiment, launched, exited)}
            )
            print(f"overhead {name} {repeat + 1}: {runs[name][-1]}", flush=True)
    result: dict[str, Any] = {"runs": runs}
    ratios = [
        sweep["wall_s"] / plain["wall_s"] for plain, sweep in zip(runs["plain"], runs["sweep"], strict=True)
    ]
    result["sweep_over_plain"] = [round(ratio, 3) for ratio in ratios]
    if compare_malloc:
        result["default_malloc_sweep_over_plain"] = [
            round(sweep["wall_s"] / plain["wall_s"], 3)
            for plain, sweep in zip(runs["plain"], runs["sweep, default malloc"], strict=True)
        ]
    if with_hf:
        path = workdir / "overhead-hf.yaml"
        path.write_text(yaml.safe_dump(overhead_config(epochs)))
        result["hf_s"] = round(timed([env_python, me, "--worker", "hf", str(path)], workdir), 1)
        result["hf_over_plain"] = round(result["hf_s"] / runs["plain"][-1]["wall_s"], 3)
    print(f"overhead: {result}", flush=True)
    return result


def packing_part(workdir: Path, epochs: int, repeats: int) -> dict[str, Any]:
    """Trial-epochs per hour of the overhead workload swept as 2 trials x 1 thread (search.resources.cpu 1,
    two at a time) and as 1 trial x 2 threads (cpu 2), `repeats` times in alternation."""
    packings = {"2 trials x 1 thread": 1, "1 trial x 2 threads": 2}
    results: dict[str, list[float]] = {name: [] for name in packings}
    trials = len(LEARNING_RATES) * len(SEEDS)
    for repeat in range(repeats):
        for name, cpus in packings.items():
            directory = workdir / f"packing-{repeat}-{cpus}"
            directory.mkdir()
            config = overhead_config(epochs)
            config["search"]["resources"] = {"cpu": cpus}
            path = directory / "packing.yaml"
            path.write_text(yaml.safe_dump(config))
            seconds = timed([str(BIN / "dicelab"), "sweep", str(path)], directory)
            results[name].append(round(trials * epochs * 3600 / seconds))
            print(f"packing {name}: {results[name][-1]} trial-epochs/hour ({seconds:.1f} s)", flush=True)
    return {"trial_epochs_per_hour": results, "trials": trials, "epochs": epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["overhead", "packing", "asha", "all"], default="all")
    parser.add_argument(
        "--epochs", type=int, default=12, help="overhead, packing: epochs per trial (12: ~12 s)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="overhead, packing: alternating repeats")
    parser.add_argument(
        "--no-hf", action="store_true", help="overhead: leave out Trainer.hyperparameter_search"
    )
    parser.add_argument(
        "--concurrent",
        type=int,
        default=CONCURRENT,
        help="overhead: trials at once, both ways (1 leaves a core to Ray and the driver)",
    )
    parser.add_argument(
        "--compare-malloc",
        action="store_true",
        help="overhead: also the sweep with glibc's default malloc arenas in its workers",
    )
    parser.add_argument("--asha-epochs", type=int, default=10, help="asha: epochs per trial")
    parser.add_argument("--worker", choices=["plain", "hf"], help=argparse.SUPPRESS)
    parser.add_argument("config", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "plain":
        return run_plain(Path(args.config))
    if args.worker == "hf":
        return run_hf(Path(args.config))

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="dicelab-bench-") as tmp:
        workdir = Path(tmp)
        if args.part in ("overhead", "all"):
            report["overhead"] = overhead_part(
                workdir, args.epochs, args.repeats, not args.no_hf, args.concurrent, args.compare_malloc
            )
        if args.part in ("packing", "all"):
            report["packing"] = packing_part(workdir, args.epochs, args.repeats)
        if args.part in ("asha", "all"):
            report["asha"] = asha_part(workdir, args.asha_epochs)
    report["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
