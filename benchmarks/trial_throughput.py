"""Training throughput of dicelab's trial loop against Hugging Face `Trainer`, measured in the same run.

Both train the same model (the task's `build_model`, same seed), on the same cached features, in the same
order (Trainer gets dicelab's shuffled order as its sampler, so both pad the same batches), with the same
batch size, collate function, loss (`task.training_loss`), optimizer settings (fused AdamW, linear
warmup/decay, clipping) and precision; they alternate `--repeats` times. Throughput is training samples per
second between the end of step `--skip` and the last step (first steps pay one-off costs), timed by a
per-step hook in each (a Reporter's on_step, a TrainerCallback's on_step_end). The ratio is dicelab /
Trainer: > 1 is faster.
`--clock cpu` times with the process's CPU time instead of wall time: on a shared machine with
train.num_threads=1 it measures the work per sample without the noise of other processes' load.

    python benchmarks/trial_throughput.py                                  # pairs, synthetic, tiny-bert
    python benchmarks/trial_throughput.py experiments/trials/mrpc-minilm.yaml --steps 30

`--defaults` compares whole trials instead, each tool at its defaults: `run_trial` (length-grouped training
batches, an evaluation per epoch in length order) against `Trainer` at its defaults (random sampler,
`DataCollatorWithPadding`, or `DataCollatorForTokenClassification` for tagging; an evaluation per epoch),
same model (`build_model`), loss, data, epochs, learning rate, schedule and batch sizes; plus dicelab with
`train.batching=random`, to separate the batching from the rest. Per seed the three run back to back (in a
rotating order); each is timed end to end (model built, trained, evaluated every epoch) in wall and process
CPU time. The dev metric of each is the task's own `evaluate` on the final weights; dicelab's length-grouped
batches are compared with random ones paired by seed (`dicelab.stats.compare`).

    python benchmarks/trial_throughput.py --defaults experiments/trials/mrpc-minilm.yaml --seeds 1 2 3 \
        --set data.max_train_examples=1200 --set train.epochs=2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from torch.utils.data import DataLoader
from transformers import (
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from dicelab.config import ExperimentConfig
from dicelab.experiment import load_experiment
from dicelab.losses import LOSSES, build_loss
from dicelab.tasks import TASKS
from dicelab.tasks._batching import row_lengths
from dicelab.tasks._heads import MODEL_INPUTS
from dicelab.training import Reporter, TrialInputs, prepare_inputs, run_trial
from dicelab.training.plan import TrainingPlan
from dicelab.training.runtime import seed_everything, select_device, select_precision

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "experiments" / "trials" / "pairs-synthetic.yaml"


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


class StepTimes(Reporter, TrainerCallback):
    """The clock at the end of every optimizer step, from either loop."""

    def __init__(self, clock: str) -> None:
        self.clock = CLOCKS[clock]
        self.times: list[float] = []

    def on_step(self, step: int, metrics: dict[str, float]) -> None:  # dicelab Reporter
        self.times.append(self.clock())

    def on_step_end(self, args, state, control, **kwargs):  # transformers TrainerCallback
        self.times.append(self.clock())

    def samples_per_second(self, skip: int, batch_size: int) -> float:
        measured = self.times[skip - 1 :]
        return (len(measured) - 1) * batch_size / (measured[-1] - measured[0])


def dicelab_loop(config: ExperimentConfig, inputs: TrialInputs, steps: int, skip: int, clock: str) -> float:
    times = StepTimes(clock)
    update = {"max_steps": steps, "log_every_steps": 1, "eval_every_steps": steps}
    config = config.model_copy(update={"train": config.train.model_copy(update=update)})
    run_trial(config, times, inputs=inputs)
    return times.samples_per_second(skip, config.train.batch_size)


def hf_trainer(config: ExperimentConfig, inputs: TrialInputs, steps: int, skip: int, clock: str) -> float:
    train = config.train
    task = TASKS.get(config.task.name)()
    device = select_device(train)
    precision = select_precision(train, device)
    seed_everything(train.seed)
    model = task.build_model(config, inputs.label_names, inputs.tokenizer)
    loss_params = dict(config.loss.params)
    if "class_counts" in LOSSES.get(config.loss.name).parameter_names():
        loss_params["class_counts"] = inputs.class_counts
    loss_fn = build_loss(config.loss.name, **loss_params).to(device)

    # dicelab's first-epoch order: with dynamic padding, other batches would have other lengths
    plan = TrainingPlan.of(len(inputs.train_features), train, row_lengths(inputs.train_features))
    order = [index for step in plan.steps_of_epoch(0) for batch in step for index in batch]

    class TaskTrainer(Trainer):
        def compute_loss(self, model, batch, return_outputs=False, num_items_in_batch=None):
            return task.training_loss(model, batch, loss_fn)

        def _get_train_sampler(self, train_dataset=None):
            return order

    times = StepTimes(clock)
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = TrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=train.batch_size,
            gradient_accumulation_steps=train.grad_accum_steps,
            max_steps=steps,
            learning_rate=train.learning_rate,
            weight_decay=train.weight_decay,
            warmup_steps=math.ceil(train.warmup_ratio * steps),
            max_grad_norm=train.max_grad_norm or 0.0,
            lr_scheduler_type="linear",
            bf16=precision == "bf16",
            use_cpu=device.type == "cpu",
            dataloader_pin_memory=device.type == "cuda",
            seed=train.seed,
            remove_unused_columns=False,  # the task's collate picks its columns
            eval_strategy="no",
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
        )
        trainer = TaskTrainer(
            model=model,
            args=arguments,
            train_dataset=inputs.train_features,
            data_collator=task.collate,
            callbacks=[times],
        )
        trainer.train()
    return times.samples_per_second(skip, train.batch_size * train.grad_accum_steps)


# -- --defaults: whole trials, each tool at its defaults ----------------------------------------------------


@dataclass
class WholeTrial:
    wall_s: float
    cpu_s: float
    dev_metric: float  # of the final weights


def timed_trial(run: Callable[[], float]) -> WholeTrial:
    wall, cpu = time.perf_counter(), time.process_time()
    metric = run()
    return WholeTrial(time.perf_counter() - wall, time.process_time() - cpu, metric)


def dicelab_defaults(config: ExperimentConfig, inputs: TrialInputs) -> float:
    result = run_trial(config, inputs=inputs)
    return result.final_metrics[result.metric]


def hf_trainer_defaults(config: ExperimentConfig, inputs: TrialInputs) -> float:
    """Trainer with what a user sets (model, loss, data, epochs, batch sizes, learning rate, warmup, an
    evaluation per epoch) and its defaults for everything else."""
    train = config.train
    task = TASKS.get(config.task.name)()
    seed_everything(train.seed)
    model = task.build_model(config, inputs.label_names, inputs.tokenizer)
    loss_fn = build_loss(config.loss.name, **config.loss.params)

    class TaskTrainer(Trainer):
        def compute_loss(self, model, batch, return_outputs=False, num_items_in_batch=None):
            loss = task.training_loss(model, batch, loss_fn)
            return (loss, (loss,)) if return_outputs else loss  # evaluation keeps the loss only

    columns = [name for name in (*MODEL_INPUTS, "labels") if name in inputs.train_features.column_names]
    collator = (
        DataCollatorForTokenClassification(inputs.tokenizer)
        if task.family == "tagging"
        else DataCollatorWithPadding(inputs.tokenizer)
    )
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = TrainingArguments(
            output_dir=output_dir,
            num_train_epochs=train.epochs,
            per_device_train_batch_size=train.batch_size,
            per_device_eval_batch_size=train.eval_batch_size,
            learning_rate=train.learning_rate,
            weight_decay=train.weight_decay,
            warmup_steps=train.warmup_ratio,  # a float below 1 is a ratio of the total steps
            seed=train.seed,
            eval_strategy="epoch",
            label_names=["labels"],  # a custom model: Trainer cannot infer them from its signature
            disable_tqdm=True,
        )
        trainer = TaskTrainer(
            model=model,
            args=arguments,
            train_dataset=inputs.train_features.select_columns(columns),
            eval_dataset=inputs.dev_features.select_columns(columns),
            data_collator=collator,
        )
        trainer.train()
    return final_dev_metric(task, model, config, inputs)


def final_dev_metric(
    task: Any, model: torch.nn.Module, config: ExperimentConfig, inputs: TrialInputs
) -> float:
    """The task's own metric on the dev set, batches in example order (what run_trial reports)."""
    model.eval()
    batches = DataLoader(
        inputs.dev_features, batch_size=config.train.eval_batch_size, collate_fn=task.collate
    )
    with torch.inference_mode():
        result = task.evaluate(model, batches, inputs.dev_features, inputs.dev_frame, inputs.label_names)
    metric = config.train.metric if config.train.metric != "auto" else task.primary_metric(inputs.label_names)
    return result.metrics[metric]


def padding_share(config: ExperimentConfig, inputs: TrialInputs, batching: str) -> float:
    """Share of the first epoch's padded tokens that are padding, with batching "length" or "random"."""
    lengths = row_lengths(inputs.train_features)
    train = config.train.model_copy(update={"batching": batching})
    batches = TrainingPlan.of(len(lengths), train, lengths).batches_of_epoch(0)
    padded = sum(len(batch) * int(lengths[batch].max()) for batch in batches)
    return 1 - int(lengths.sum()) / padded


def defaults_main(args: argparse.Namespace, config: ExperimentConfig) -> None:
    """Whole trials per seed: dicelab at its defaults, with random batches, and Trainer at its defaults."""
    from dicelab.stats import compare

    if config.train.num_threads is not None:
        torch.set_num_threads(config.train.num_threads)  # Trainer runs under the same thread count
    inputs = prepare_inputs(config)
    ways: dict[str, Callable[[ExperimentConfig, TrialInputs], float]] = {
        "dicelab": dicelab_defaults,
        "dicelab_random_batches": dicelab_defaults,
    }
    if not args.no_trainer:
        ways["hf_trainer"] = hf_trainer_defaults
    runs: dict[str, dict[int, WholeTrial]] = {name: {} for name in ways}
    console = Console()
    for turn, seed in enumerate(args.seeds):
        names, first = list(ways), turn % len(ways)
        for name in names[first:] + names[:first]:  # rotate who runs first: the load drifts
            batching = "random" if name == "dicelab_random_batches" else config.train.batching
            seeded = config.train.model_copy(update={"seed": seed, "batching": batching})
            trial_config = config.model_copy(update={"train": seeded})
            run = timed_trial(lambda way=ways[name], c=trial_config: way(c, inputs))
            runs[name][seed] = run
            print(
                f"seed {seed}: {name} {run.wall_s:.1f} s wall, {run.cpu_s:.1f} s CPU, "
                f"dev {run.dev_metric:.4f}",
                flush=True,
            )

    metric = config.train.metric if config.train.metric != "auto" else "dev metric"
    setting = (
        f"{config.name}: {config.model.backbone}, {len(inputs.train_features)} train / "
        f"{len(inputs.dev_features)} dev examples, {config.train.epochs} epochs, "
        f"batch {config.train.batch_size}"
    )
    table = Table(title=f"whole trials, each at its defaults ({setting})")
    # without Trainer, speed-ups are against dicelab with random batches
    baseline = "dicelab_random_batches" if args.no_trainer else "hf_trainer"
    for column in (
        "loop",
        "wall s (median)",
        "CPU s (median)",
        f"{baseline} / this, wall",
        f"dev {metric} (mean ± sd)",
    ):
        table.add_column(column, justify="left" if column == "loop" else "right")
    summary: dict[str, Any] = {"config": config.name, "seeds": args.seeds, "baseline": baseline}
    for name, by_seed in runs.items():
        speedups = [runs[baseline][seed].wall_s / run.wall_s for seed, run in by_seed.items()]
        values = [run.dev_metric for run in by_seed.values()]
        row = {
            "wall_s": statistics.median(run.wall_s for run in by_seed.values()),
            "cpu_s": statistics.median(run.cpu_s for run in by_seed.values()),
            "speedup_wall": statistics.median(speedups),
            "speedup_cpu": statistics.median(
                runs[baseline][seed].cpu_s / run.cpu_s for seed, run in by_seed.items()
            ),
            "dev_metric": {seed: run.dev_metric for seed, run in by_seed.items()},
        }
        summary[name] = row
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        table.add_row(
            name,
            f"{row['wall_s']:.1f}",
            f"{row['cpu_s']:.1f}",
            f"{row['speedup_wall']:.2f}x (CPU {row['speedup_cpu']:.2f}x)",
            f"{statistics.mean(values):.4f} ± {spread:.4f}",
        )
    console.print(table)
    shares = {batching: padding_share(config, inputs, batching) for batching in ("random", "length")}
    summary["padding_share"] = shares
    console.print(
        f"padding share of training tokens: random {shares['random']:.1%}, length {shares['length']:.1%}"
    )
    for other in [name for name in runs if name != "dicelab"]:
        result = compare(summary["dicelab"]["dev_metric"], summary[other]["dev_metric"], test="t")
        summary[f"dev_metric_dicelab_minus_{other}"] = dataclasses.asdict(result)
        console.print(
            f"dev {metric}, dicelab - {other} (paired by seed, n={result.n}): {result.difference:+.4f} "
            f"[{result.low:+.4f}, {result.high:+.4f}], paired t p={result.p_value:.2f}"
        )
    if args.json:
        print(json.dumps(summary))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps per measured run")
    parser.add_argument("--skip", type=int, default=5, help="first steps left out of the timing")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each loop, alternating")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall or process CPU time")
    parser.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    parser.add_argument("--defaults", action="store_true", help="whole trials, each tool at its defaults")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[1, 2, 3], help="--defaults: train.seed values"
    )
    parser.add_argument(
        "--no-trainer",
        action="store_true",
        help="--defaults: leave out Trainer (length-grouped vs random batches only, e.g. for more seeds)",
    )
    args = parser.parse_args()

    config = load_experiment(args.config, args.set)
    if args.defaults:
        return defaults_main(args, config)
    if config.train.num_threads is not None:
        torch.set_num_threads(config.train.num_threads)  # Trainer runs under the same thread count
    inputs = prepare_inputs(config)
    batches_per_step = config.train.batch_size * config.train.grad_accum_steps
    if args.steps * batches_per_step > len(inputs.train_features):
        parser.error(f"--steps {args.steps} needs {args.steps * batches_per_step} training examples")

    console = Console()
    results: dict[str, list[float]] = {"dicelab": [], "hf_trainer": []}
    for repeat in range(args.repeats):
        for name, measure in (("dicelab", dicelab_loop), ("hf_trainer", hf_trainer)):
            results[name].append(measure(config, inputs, args.steps, args.skip, args.clock))
            console.print(f"repeat {repeat + 1}: {name} {results[name][-1]:.1f} samples/s")
    median = {name: statistics.median(values) for name, values in results.items()}
    ratio = median["dicelab"] / median["hf_trainer"]

    setting = f"{config.name}, {config.model.backbone}, batch {batches_per_step}, {args.clock} clock"
    table = Table(title=f"training samples/s: {setting}")
    table.add_column("loop")
    table.add_column("samples/s (median)", justify="right")
    table.add_column("runs", justify="right")
    for name, values in results.items():
        table.add_row(name, f"{median[name]:.1f}", " ".join(f"{value:.1f}" for value in values))
    console.print(table)
    console.print(f"ratio dicelab / HF Trainer: [bold]{ratio:.2f}x[/]")
    if args.json:
        summary = {"config": config.name, "clock": args.clock, **median, "ratio": ratio, "runs": results}
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
