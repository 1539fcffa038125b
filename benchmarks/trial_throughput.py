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
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table
from transformers import Trainer, TrainerCallback, TrainingArguments

from dicelab.config import ExperimentConfig
from dicelab.experiment import load_experiment
from dicelab.losses import LOSSES, build_loss
from dicelab.tasks import TASKS
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
    plan = TrainingPlan.of(len(inputs.train_features), train)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps per measured run")
    parser.add_argument("--skip", type=int, default=5, help="first steps left out of the timing")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each loop, alternating")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall or process CPU time")
    parser.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    args = parser.parse_args()

    config = load_experiment(args.config, args.set)
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
