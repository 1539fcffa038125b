"""Progress on the terminal: a rich progress bar (step/total, loss, samples/s) and one line per evaluation."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from dicelab.config import ExperimentConfig
from dicelab.tracking import conventions as names
from dicelab.training.reporter import Evaluation, Reporter, TrialResult


class ConsoleReporter(Reporter):
    """Writes to stderr by default, so stdout stays free for results (`dicelab trial --json`).

    Progress is a bar on a terminal and one line per logged step elsewhere (a log file, CI).
    quiet: no progress, only the start line, one line per evaluation and the outcome.
    """

    def __init__(self, *, quiet: bool = False, console: Console | None = None):
        self.quiet = quiet
        self.console = console or Console(stderr=True, soft_wrap=True)
        self._progress: Progress | None = None
        self._task_id: Any = None
        self._steps_total: int | None = None

    def on_start(self, config: ExperimentConfig, info: dict[str, Any]) -> None:
        resumed = f", resuming at step {info['start_step']}" if info.get("start_step") else ""
        self.console.print(
            f"[bold]{config.name}[/]: {config.task.name} on {config.data.source} "
            f"({info.get('train_examples')} train / {info.get('dev_examples')} dev), "
            f"loss {config.loss.name}, {info.get('steps_total')} steps "
            f"on {info.get('device')} ({info.get('precision')}){resumed}",
            highlight=False,
        )
        self._steps_total = info.get("steps_total")
        if self.quiet or not self.console.is_terminal:
            return
        self._progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[speed]} samples/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
        )
        self._progress.start()
        self._task_id = self._progress.add_task(
            "train", total=info.get("steps_total"), completed=info.get("start_step", 0), loss="-", speed="-"
        )

    def on_step(self, step: int, metrics: dict[str, float]) -> None:
        loss = f"{metrics.get(names.TRAIN_LOSS, float('nan')):.4f}"
        speed = f"{metrics.get(names.SAMPLES_PER_SECOND, 0.0):.0f}"
        if self._progress is not None:
            self._progress.update(self._task_id, completed=step, loss=loss, speed=speed)
        elif not self.quiet:
            learning_rate = metrics.get(names.LEARNING_RATE, float("nan"))
            self.console.print(
                f"step {step}/{self._steps_total}  loss {loss}  lr {learning_rate:.2e}  {speed} samples/s",
                highlight=False,
            )

    def on_evaluation(self, evaluation: Evaluation) -> None:
        if self._progress is not None:
            self._progress.update(self._task_id, completed=evaluation.step)
        shown = "  ".join(f"{key} {value:.4f}" for key, value in evaluation.metrics.items())
        best = "  [green]*best[/]" if evaluation.is_best else ""
        self.console.print(
            f"step {evaluation.step} (epoch {evaluation.epoch:.2f})  {shown}{best}", highlight=False
        )

    def on_end(self, result: TrialResult) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        style = "green" if result.outcome in (names.COMPLETED, names.EARLY_STOPPED) else "red"
        reason = f": {result.reason}" if result.reason else ""
        self.console.print(
            f"[{style}]{result.outcome}[/] after {result.steps} steps{reason}", highlight=False
        )
        if result.resource_metrics:
            self.console.print(usage_line(result.resource_metrics), highlight=False)
        if result.held_out_metrics:
            shown = "  ".join(f"{key} {value:.4f}" for key, value in result.held_out_metrics.items())
            self.console.print(f"at the best state: {shown}", highlight=False)
        if result.held_out_error:
            self.console.print(f"[bold yellow]the test split was not scored[/]: {result.held_out_error}")
        if result.degenerate:
            self.console.print(
                f"[bold yellow]warning: degenerate trial[/]: {result.degenerate}", highlight=False
            )


def usage_line(metrics: dict[str, float]) -> str:
    """E.g. "used 41.2 s wall, 80.3 CPU-s, 10.3 GPU-s, peak GPU memory 812 MiB, 3 fp16 steps skipped"."""
    parts = [
        f"used {metrics.get(names.COST_WALL_SECONDS, 0.0):.1f} s wall",
        f"{metrics.get(names.COST_CPU_SECONDS, 0.0):.1f} CPU-s",
    ]
    if metrics.get(names.COST_GPU_SECONDS):
        parts.append(f"{metrics[names.COST_GPU_SECONDS]:.1f} GPU-s")
    if names.GPU_PEAK_MEMORY_MB in metrics:
        parts.append(f"peak GPU memory {metrics[names.GPU_PEAK_MEMORY_MB]:.0f} MiB")
    if metrics.get(names.SKIPPED_STEPS):
        parts.append(f"{metrics[names.SKIPPED_STEPS]:.0f} fp16 steps skipped")
    return ", ".join(parts)
