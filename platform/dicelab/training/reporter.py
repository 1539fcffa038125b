"""How the trial loop talks to the outside world (console, MLflow, Ray Tune): the Reporter interface.

The loop calls these hooks in order: on_start, then on_step / on_evaluation as training goes, then exactly
one on_end (also when the trial fails: `result.outcome` and `result.reason` say why). A reporter asks the
loop to stop through `should_stop()` (the trial ends early_stopped); a reporter whose runner has already
stopped the trial (Tune's scheduler, from inside a report) raises `TrialStopped`, and the trial ends at once
as scheduler_stopped (the outcomes are `dicelab.tracking.lifecycle.State`s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dicelab.config import ExperimentConfig


class TrialStopped(BaseException):
    """Raised by a reporter when the trial's runner stopped the trial (Tune's scheduler, inside a report):
    the loop ends it as scheduler_stopped and re-raises. A BaseException, like the SystemExit it stands for,
    so that no `except Exception` on the way swallows it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class TrialResult:
    # a final lifecycle State: completed | early_stopped | scheduler_stopped | non_finite | failed |
    # interrupted
    outcome: str
    metric: str  # the primary dev metric name, e.g. "f1"
    final_metrics: dict[str, float] = field(default_factory=dict)  # dev metrics at the last evaluation
    best_metrics: dict[str, float] = field(default_factory=dict)  # dev metrics of the best evaluation
    best_step: int | None = None
    steps: int = 0
    reason: str | None = None  # one line, for failed / non_finite / early_stopped
    run_id: str | None = None  # the MLflow run, when tracked
    # One line when the best evaluation is a degenerate predictor (Task.degenerate), e.g. "predicts no entity
    # at its best evaluation"; reporters record it (MLflow tag dicelab.degenerate, a console warning).
    degenerate: str | None = None
    # The task's EvalResult of the best evaluation (dev predictions, per-class report), and the model weights
    # at that evaluation (CPU tensors: `task.build_model(...).load_state_dict(best_model_state)`).
    best_eval_result: Any = field(default=None, repr=False)
    best_model_state: dict[str, Any] | None = field(default=None, repr=False)
    # The weights at the end of training, kept only when train.save_model is "last".
    last_model_state: dict[str, Any] | None = field(default=None, repr=False)
    # The saved model (dicelab.models), "models:/<model_id>", when the trial's reporter logged one.
    model_uri: str | None = None
    # What the trial used (dicelab.training.resources): cost/wall_seconds, cost/cpu_seconds, cost/gpu_seconds,
    # gpu/peak_memory_mb (CUDA only) and train_skipped_steps; set before on_end, whatever the outcome.
    resource_metrics: dict[str, float] = field(default_factory=dict)
    # Scored once at the end of a finished trial (dicelab.training.held_out): test_<metric> of the best state
    # when a test split exists, the dev-tuned threshold and calibration; its test EvalResult; or why not.
    held_out_metrics: dict[str, float] = field(default_factory=dict)
    test_eval_result: Any = field(default=None, repr=False)
    held_out_error: str | None = None


@dataclass
class Evaluation:
    step: int  # optimizer steps so far
    epoch: float  # fractional epochs so far
    metrics: dict[str, float]  # dev metrics without prefix ("f1", "precision", ...), plus "train_loss"
    is_best: bool
    # Returns the full training state (model, optimizer, scheduler, rng, progress) for a checkpoint.
    # The loop can be resumed from it: run_trial(..., resume_state=state).
    state: Callable[[], dict[str, Any]]
    eval_result: Any = None  # the task's EvalResult (predictions, per-class report)
    # Training side since the previous evaluation: train_loss, learning_rate, train_samples_per_second.
    train_metrics: dict[str, float] = field(default_factory=dict)


class Reporter:
    """Base reporter: every hook is optional."""

    def on_start(self, config: ExperimentConfig, info: dict[str, Any]) -> None:
        """info: {"train_examples", "dev_examples", "steps_total", "data_fingerprint", "manifest", ...}."""

    def on_step(self, step: int, metrics: dict[str, float]) -> None:
        """Called every train.log_every_steps: train_loss, learning_rate, train_samples_per_second."""

    def on_evaluation(self, evaluation: Evaluation) -> None:
        """Called after each evaluation on the dev split."""

    def should_stop(self) -> bool:
        return False

    def on_end(self, result: TrialResult) -> None:
        """Called once, last, whatever the outcome."""


class MultiReporter(Reporter):
    def __init__(self, reporters: list[Reporter]):
        self.reporters = reporters

    def on_start(self, config: ExperimentConfig, info: dict[str, Any]) -> None:
        for reporter in self.reporters:
            reporter.on_start(config, info)

    def on_step(self, step: int, metrics: dict[str, float]) -> None:
        for reporter in self.reporters:
            reporter.on_step(step, metrics)

    def on_evaluation(self, evaluation: Evaluation) -> None:
        for reporter in self.reporters:
            reporter.on_evaluation(evaluation)

    def should_stop(self) -> bool:
        return any(reporter.should_stop() for reporter in self.reporters)

    def on_end(self, result: TrialResult) -> None:
        for reporter in self.reporters:
            reporter.on_end(result)
