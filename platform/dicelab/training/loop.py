"""The trial: one plain-PyTorch train/eval loop, reporting through a Reporter.

`run_trial` returns a TrialResult when the trial completes or stops early (patience, or a reporter's
`should_stop`). It raises `TrialFailed` when the loss or the gradient norm becomes non-finite, re-raises a
reporter's `TrialStopped` (its runner's scheduler stopped it: scheduler_stopped), a KeyboardInterrupt
(interrupted) and any other exception (failed); in each case `reporter.on_end` has already recorded the
outcome (a `dicelab.tracking.lifecycle.State`) and a one-line reason.
Errors found while setting up (bad config, unreadable data, unknown backbone) raise before `on_start`.

`Evaluation.state()` snapshots the trial when it is called: call it inside `on_evaluation` (a checkpoint).

The step loop does not wait on the device between checks: each step leaves its loss and gradient norm on
the device, and one host sync reads those of the steps since the last check at every logging step
(train.log_every_steps), every evaluation and the end. A NaN then stops the trial, named at the step where
it first appeared (Hugging Face Trainer syncs every step for its NaN filter). Only fp16 reads its gradient
scaler every step: whether the step was skipped decides the schedule.

In fp16 a gradient scaler multiplies the loss before the backward pass; a step whose gradients overflow is
skipped by the scaler (which then halves the scale) instead of stopping the trial. Skipped steps are counted
(`train_skipped_steps`); MAX_CONSECUTIVE_SKIPS of them in a row end the trial as non-finite: the scale has
then fallen by 2**20 (from 65536 to below 0.1), so the gradients overflow even unscaled and the trial would
otherwise sit on a plateau of skipped steps.

At its end the trial records what it used (`TrialResult.resource_metrics`: wall, CPU and GPU seconds, peak
GPU memory, skipped steps; see `dicelab.training.resources`) and drops its model and optimizer, returning
their GPU memory, before `reporter.on_end`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader

from dicelab.config import ExperimentConfig
from dicelab.errors import ConfigError, TrialFailed, first_line
from dicelab.losses import LOSSES, build_loss
from dicelab.tasks import TASKS
from dicelab.tasks._batching import LengthOrderedBatches, row_lengths
from dicelab.tasks.backbones import backbone_source
from dicelab.tasks.base import EvalResult
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import State
from dicelab.training.held_out import score_held_out
from dicelab.training.inputs import TrialInputs, inputs_key, prepare_inputs
from dicelab.training.optim import build_optimizer, build_scheduler
from dicelab.training.plan import TrainingPlan
from dicelab.training.reporter import Evaluation, Reporter, TrialResult, TrialStopped
from dicelab.training.resources import ResourceMeter, TrialResources, default_resources, release_memory
from dicelab.training.runtime import (
    autocast,
    compile_model,
    cpu_copy,
    device_fallback,
    gradient_scaler,
    restore_rng,
    rng_state,
    seed_everything,
    select_device,
    select_precision,
    torch_settings,
)

STATE_FORMAT = 1
MAX_CONSECUTIVE_SKIPS = 20  # fp16 steps the gradient scaler may skip in a row before the trial is non-finite


def run_trial(
    config: ExperimentConfig,
    reporter: Reporter | None = None,
    *,
    inputs: TrialInputs | None = None,
    resume_state: dict[str, Any] | None = None,
    resources: TrialResources | None = None,
) -> TrialResult:
    """Train and evaluate one configuration (see the module docstring for what it returns and raises).

    resume_state: a dict from `Evaluation.state()`; the trial continues exactly where that one was.
    resources: what the runner reserved for the trial (a sweep passes Ray's GPU fraction and ids); None is a
    whole GPU when the trial runs on CUDA, none on CPU.
    """
    reporter = reporter or Reporter()
    inputs = inputs if inputs is not None else prepare_inputs(config)
    if inputs.key != inputs_key(config):
        raise ConfigError("run_trial: `inputs` were prepared for a different data/task/backbone config")
    if resume_state is not None and resume_state.get("inputs_key") != inputs.key:
        raise ConfigError(
            "run_trial: resume_state comes from a trial with a different data/task/backbone config"
        )
    assigned_gpus = resources.gpu_ids if resources is not None else ()
    fallback = device_fallback(assigned_gpus)
    if fallback is not None:
        print(f"dicelab trial: {fallback}", file=sys.stderr, flush=True)  # once; also a tag on the run
    device = select_device(config.train, assigned_gpus)
    meter = ResourceMeter(device, resources if resources is not None else default_resources(device))
    with torch_settings(config.train, device):
        meter.start()
        trial = Trial(config, inputs, device, resume_state, fallback=fallback)
        try:
            reporter.on_start(config, trial.info())
            outcome, reason = trial.train(reporter)
        except NonFiniteLoss as error:
            trial.finish(reporter, meter, State.NON_FINITE, str(error))
            raise TrialFailed(str(error)) from None
        except TrialStopped as stop:
            trial.finish(reporter, meter, State.SCHEDULER_STOPPED, stop.reason)
            raise
        except KeyboardInterrupt:
            trial.finish(reporter, meter, State.INTERRUPTED, f"interrupted at {trial.where_now()}")
            raise
        except BaseException as error:
            trial.finish(reporter, meter, State.FAILED, first_line(error, with_type=True))
            raise
        return trial.finish(reporter, meter, outcome, reason)


@dataclass
class Progress:
    """What the loop knows besides weights and optimizer: saved in, and restored from, the resume state."""

    step: int = 0  # optimizer steps done
    final_metrics: dict[str, float] = field(default_factory=dict)  # of the last evaluation
    best_value: float = -math.inf
    best_step: int | None = None
    best_metrics: dict[str, float] = field(default_factory=dict)
    best_eval: dict[str, Any] | None = None  # the best EvalResult, as a plain dict
    best_model_state: dict[str, torch.Tensor] | None = None  # CPU copy of the weights at the best evaluation
    evals_without_improvement: int = 0
    skipped_steps: int = 0  # steps the fp16 gradient scaler skipped (overflowing gradients)
    consecutive_skips: int = 0


class NonFiniteLoss(Exception):
    pass


class Trial:
    """The pieces of one trial (model, loss, optimizer, schedule, progress) and the loop over them."""

    def __init__(
        self,
        config: ExperimentConfig,
        inputs: TrialInputs,
        device: torch.device,
        resume: dict[str, Any] | None,
        *,
        fallback: str | None = None,
    ):
        train = config.train
        self.config, self.inputs, self.device, self.fallback = config, inputs, device, fallback
        self.task = TASKS.get(config.task.name)()
        self.metric = train.metric if train.metric != "auto" else self.task.primary_metric(inputs.label_names)
        self.minimise = train.mode == "min"  # the best evaluation is the metric's lowest (a loss)
        self.precision = select_precision(train, device, fell_back=fallback is not None)
        self.scaler = gradient_scaler(device, self.precision)
        lengths = row_lengths(inputs.train_features) if train.batching == "length" else None
        self.plan = TrainingPlan.of(len(inputs.train_features), train, lengths)

        seed_everything(train.seed)  # before building: the head (and tiny-bert) initialise from it
        self.model = self.task.build_model(config, inputs.label_names, inputs.tokenizer).to(device)
        if train.compile:
            compile_model(self.model)
        loss_params = dict(config.loss.params)
        if "class_counts" in LOSSES.get(config.loss.name).parameter_names():
            loss_params["class_counts"] = inputs.class_counts  # wce's weights come from the training split
        self.loss_fn = build_loss(config.loss.name, **loss_params).to(device)
        self.optimizer = build_optimizer(self.model, train)
        self.scheduler = build_scheduler(self.optimizer, train, self.plan.total_steps)
        self.progress = Progress(best_value=math.inf if self.minimise else -math.inf)
        if resume is not None:
            self.model.load_state_dict(resume["model"])
            self.optimizer.load_state_dict(resume["optimizer"])
            self.scheduler.load_state_dict(resume["scheduler"])
            self.progress = Progress(**resume["progress"])
            if self.scaler is not None and resume.get("scaler"):
                self.scaler.load_state_dict(resume["scaler"])
            restore_rng(resume["rng"])
        # The loss scale after the last step, read without a sync (a new or restored scaler knows it).
        self.loss_scale = self.scaler.get_scale() if self.scaler is not None else 1.0
        self.unchecked: list[tuple[int, torch.Tensor]] = []  # (step, [loss, gradient norm]) still on device

    def train(self, reporter: Reporter) -> tuple[str, str | None]:
        """Run optimizer steps until done or stopped; returns (outcome, reason)."""
        train, plan, progress = self.config.train, self.plan, self.progress
        log_window, eval_window = Window(), Window()
        self.model.train()
        while progress.step < plan.total_steps:
            epoch, done_in_epoch = divmod(progress.step, plan.steps_per_epoch)
            steps = plan.steps_of_epoch(epoch)[done_in_epoch:][: plan.total_steps - progress.step]
            micro_batches = [indices for step in steps for indices in step]
            batches = iter(self._loader(self.inputs.train_features, batch_sampler=micro_batches))
            for step in steps:
                started = time.perf_counter()
                loss_and_norm = self._optimizer_step([next(batches) for _ in step])
                self.unchecked.append((progress.step, loss_and_norm))
                logging = progress.step % train.log_every_steps == 0
                end_of_epoch = progress.step % plan.steps_per_epoch == 0
                due = progress.step % train.eval_every_steps == 0 if train.eval_every_steps else end_of_epoch
                evaluating = due or progress.step == plan.total_steps
                losses = self._check_steps() if logging or evaluating else []  # the host sync
                seconds = time.perf_counter() - started
                for window in (log_window, eval_window):
                    window.add(losses, sum(len(indices) for indices in step), seconds)
                learning_rate = self.scheduler.get_last_lr()[0]
                if logging:
                    reporter.on_step(progress.step, self._train_metrics(log_window, learning_rate))

                if evaluating:
                    evaluation = self._evaluate()
                    self._report(evaluation, self._train_metrics(eval_window, learning_rate), reporter)
                    patience = train.early_stopping_patience
                    if patience is not None and progress.evals_without_improvement >= patience:
                        return State.EARLY_STOPPED, (
                            f"no improvement of {names.dev_metric(self.metric)} in {patience} evaluations "
                            f"(best {progress.best_value:.4f} at step {progress.best_step})"
                        )
                if reporter.should_stop():
                    self._check_steps()  # a NaN before the stop still makes the trial non-finite
                    return State.EARLY_STOPPED, f"stopped on request at step {progress.step}"
        return State.COMPLETED, None

    def _check_steps(self) -> list[float]:
        """The losses of the steps since the last check, read in one host sync; NonFiniteLoss at the first
        of those steps whose loss (or, without a scaler, gradient norm) is not finite."""
        if not self.unchecked:
            return []
        values = torch.stack([pair for _, pair in self.unchecked]).tolist()
        steps = [step for step, _ in self.unchecked]
        self.unchecked.clear()
        for step, (loss, norm) in zip(steps, values, strict=True):
            # Under a scaler, overflowing gradients are the scaler's to skip; a non-finite loss is fatal.
            checks = [("loss", loss)] + ([] if self.scaler is not None else [("gradient norm", norm)])
            for what, value in checks:
                if not math.isfinite(value):
                    raise NonFiniteLoss(f"non-finite {what} ({value}) at {self._where(step)}")
        return [loss for loss, _ in values]

    def _optimizer_step(self, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        """Accumulate gradients over the micro-batches (mean loss), clip, step; returns [loss, gradient norm]
        on the device (checked by `_check_steps`)."""
        scaler = self.scaler
        step_loss = torch.zeros((), device=self.device)
        for batch in batches:
            batch = {key: value.to(self.device, non_blocking=True) for key, value in batch.items()}
            with autocast(self.device, self.precision):
                loss = self.task.training_loss(self.model, batch, self.loss_fn)
            share = loss / len(batches)
            (scaler.scale(share) if scaler is not None else share).backward()
            step_loss += loss.detach()
        step_loss /= len(batches)
        if scaler is not None:
            scaler.unscale_(self.optimizer)  # clip, and report, the true gradients
        grad_norm = torch.zeros((), device=self.device)
        if self.config.train.max_grad_norm is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(
                self.model.parameters(), self.config.train.max_grad_norm
            )
        stepped = True
        if scaler is None:
            self.optimizer.step()
        else:
            scale = self.loss_scale
            scaler.step(self.optimizer)  # skipped when unscale_ found inf / NaN gradients
            scaler.update()  # ... and then the scale is halved
            self.loss_scale = scaler.get_scale()  # a second sync, on fp16 steps only
            stepped = self.loss_scale >= scale
            self._count_skip(stepped, scale)
        if stepped:  # a skipped step leaves the schedule where it was (as accelerate does)
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.progress.step += 1
        return torch.stack([step_loss, grad_norm.to(step_loss)])

    def _count_skip(self, stepped: bool, scale: float) -> None:
        progress = self.progress
        if stepped:
            progress.consecutive_skips = 0
            return
        progress.skipped_steps += 1
        progress.consecutive_skips += 1
        if progress.consecutive_skips >= MAX_CONSECUTIVE_SKIPS:
            raise NonFiniteLoss(
                f"the fp16 gradient scaler skipped {progress.consecutive_skips} steps in a row "
                f"(inf/NaN gradients down to loss scale {scale:g}) at {self._where(progress.step + 1)}"
            )

    def where_now(self) -> str:
        return f"step {self.progress.step} (epoch {self.plan.epoch_of(self.progress.step):.2f})"

    def _where(self, step: int) -> str:
        return f"step {step} (epoch {self.plan.epoch_of(step):.2f})"

    def _train_metrics(self, window: Window, learning_rate: float) -> dict[str, float]:
        metrics = window.take(learning_rate)
        if self.scaler is not None:
            metrics[names.SKIPPED_STEPS] = float(self.progress.skipped_steps)
        return metrics

    def _evaluate(self) -> EvalResult:
        self.model.eval()
        features, frame, label_names = (
            self.inputs.dev_features,
            self.inputs.dev_frame,
            self.inputs.label_names,
        )
        # Length order pads least; the task puts its outputs back in example order.
        batches = LengthOrderedBatches(
            features, self.task.collate, self.config.train.eval_batch_size, self.device.type == "cuda"
        )
        with torch.inference_mode(), autocast(self.device, self.precision):
            evaluation = self.task.evaluate(self.model, batches, features, frame, label_names)
        self.model.train()
        if self.metric not in evaluation.metrics:
            available = ", ".join(evaluation.metrics)
            raise ConfigError(
                f"train.metric: {self.metric!r} is not a dev metric of {self.task.name} ({available})"
            )
        return evaluation

    def _report(self, evaluation: EvalResult, train_metrics: dict[str, float], reporter: Reporter) -> None:
        """Track the best evaluation (weights, predictions) and patience, then report the evaluation."""
        progress = self.progress
        value = evaluation.metrics[self.metric]
        is_best = value < progress.best_value if self.minimise else value > progress.best_value
        progress.final_metrics = dict(evaluation.metrics)
        if is_best:
            progress.best_value, progress.best_step = value, progress.step
            progress.best_metrics = dict(evaluation.metrics)
            progress.best_eval = dataclasses.asdict(evaluation)
            progress.best_model_state = cpu_copy(self.model.state_dict())
            progress.evals_without_improvement = 0
        else:
            progress.evals_without_improvement += 1
        reporter.on_evaluation(
            Evaluation(
                step=progress.step,
                epoch=self.plan.epoch_of(progress.step),
                metrics={**evaluation.metrics, names.TRAIN_LOSS: train_metrics[names.TRAIN_LOSS]},
                is_best=is_best,
                state=self.state,
                eval_result=evaluation,
                train_metrics=train_metrics,
            )
        )

    def _loader(self, features: Any, **batching: Any) -> DataLoader:
        # Its own generator: creating a loader must not draw from the global RNG that dropout uses,
        # or a resumed trial would see different dropout masks.
        return DataLoader(
            features,
            collate_fn=self.task.collate,
            generator=torch.Generator(),
            pin_memory=self.device.type == "cuda",  # with the non_blocking copies in _optimizer_step
            **batching,
        )

    def state(self) -> dict[str, Any]:
        """A snapshot to resume from: plain values and tensors (loads with torch.load(weights_only=True))."""
        progress = {f.name: getattr(self.progress, f.name) for f in dataclasses.fields(self.progress)}
        return {
            "format": STATE_FORMAT,
            "inputs_key": self.inputs.key,
            "model": cpu_copy(self.model.state_dict()),
            "optimizer": cpu_copy(self.optimizer.state_dict()),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_state(),
            "progress": cpu_copy(progress),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
        }

    def info(self) -> dict[str, Any]:
        return {
            "train_examples": self.plan.examples,
            "dev_examples": len(self.inputs.dev_features),
            "test_examples": len(self.inputs.test_features) if self.inputs.test_features is not None else 0,
            "steps_total": self.plan.total_steps,
            "steps_per_epoch": self.plan.steps_per_epoch,
            "start_step": self.progress.step,
            "metric": self.metric,
            "device": str(self.device),
            "device_fallback": self.fallback,
            "precision": self.precision,
            "data_fingerprint": self.inputs.data_fingerprint,
            "manifest": self.inputs.manifest,
            "label_names": self.inputs.label_names,
            "features_cached": self.inputs.features_cached,
            "tokenizer_path": self.inputs.tokenizer_path,  # what a saved model keeps (dicelab.models)
            "backbone_commit": backbone_source(self.config.model).commit,  # the hub commit loaded, if any
        }

    def finish(
        self, reporter: Reporter, meter: ResourceMeter, outcome: str, reason: str | None
    ) -> TrialResult:
        """Measure what the trial used, free its model's memory, then report the outcome (exactly once)."""
        result = self.result(outcome, reason)
        if outcome in (State.COMPLETED, State.EARLY_STOPPED):  # scored once, with the best state
            score_held_out(
                self.task, self.model, self.inputs, self.config.train, self.device, self.precision, result
            )
        result.resource_metrics = {**meter.metrics(), names.SKIPPED_STEPS: float(self.progress.skipped_steps)}
        # The weights the result keeps (best_model_state) are CPU copies: the GPU copies can go now.
        del self.model, self.optimizer, self.scheduler, self.loss_fn, self.scaler
        release_memory(self.device)
        reporter.on_end(result)
        return result

    def result(self, outcome: str, reason: str | None) -> TrialResult:
        progress = self.progress
        best = EvalResult(**progress.best_eval) if progress.best_eval else None
        return TrialResult(
            outcome=outcome,
            metric=self.metric,
            final_metrics=dict(progress.final_metrics),
            best_metrics=dict(progress.best_metrics),
            best_step=progress.best_step,
            steps=progress.step,
            reason=reason,
            best_eval_result=best,
            best_model_state=progress.best_model_state,
            # train.save_model "last": the weights at the end of training, copied before they are freed
            last_model_state=(
                cpu_copy(self.model.state_dict()) if self.config.train.save_model == "last" else None
            ),
            # what the task calls a degenerate predictor (no positive, no entity, one class) at the best state
            degenerate=self.task.degenerate(best, self.inputs.label_names) if best is not None else None,
        )


class Window:
    """Training loss and throughput since the window was last taken (one for logging, one per evaluation)."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.samples, self.seconds = 0, 0.0

    def add(self, losses: list[float], samples: int, seconds: float) -> None:
        """A step's samples and seconds, and the losses checked at its end (none between checks)."""
        self.losses += losses
        self.samples += samples
        self.seconds += seconds

    def take(self, learning_rate: float) -> dict[str, float]:
        metrics = {
            names.TRAIN_LOSS: sum(self.losses) / max(len(self.losses), 1),
            names.LEARNING_RATE: learning_rate,
            names.SAMPLES_PER_SECOND: self.samples / self.seconds if self.seconds > 0 else 0.0,
        }
        self.losses, self.samples, self.seconds = [], 0, 0.0
        return metrics
