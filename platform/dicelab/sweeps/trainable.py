"""The Ray Tune trainable: a sweep trial is `run_trial`, as in `dicelab trial`, plus a Tune reporter.

- Each evaluation is reported to Tune, with a checkpoint of the full training state once
  `search.checkpoint_interval_s` has passed since the last one, so a crashed trial is retried from its last
  checkpoint (`search.max_failures`) and an interrupted sweep resumes (`--resume`).
- The trial's MLflow child run is found by its tags (sweep id + trial id) before it is created, so retries
  and resumes reopen the same run.
- Deterministic failures are recorded and not retried: a non-finite loss (`TrialFailed`) or a user error
  (`DicelabError`: e.g. a trial asking for CUDA on a CPU node) would fail the same way again, so the trial
  ends its run as FAILED and returns. Any other exception (a crash, a lost worker) is raised to Tune, which
  retries it from the last checkpoint up to `search.max_failures` times.
- The run's states and outcome are `dicelab.tracking.lifecycle`'s: the trial sends it events (through its
  MLflow reporter, and here when it fails before or after that reporter's end).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
import torch
import transformers
from mlflow import MlflowClient
from mlflow.entities import RunTag
from ray import tune

from dicelab import garbage
from dicelab.config import ExperimentConfig, flatten_config
from dicelab.errors import DicelabError, TrialFailed, first_line
from dicelab.plugins import Pin, import_pinned
from dicelab.sweeps import ray_adapter, records
from dicelab.sweeps.space import LOSS_KEY, SEED_KEY, Point, SweepPlan
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import RESTORED_FROM_STEP as RESTORED_FROM_STEP  # beside the trial's tags
from dicelab.tracking.lifecycle import Event, State, TrialRun, is_final, state_of
from dicelab.training import inputs_key, run_trial
from dicelab.training.reporter import Evaluation, Reporter, TrialResult, TrialStopped
from dicelab.training.reporters import MlflowReporter
from dicelab.training.resources import TrialResources
from dicelab.words import format_value

STATE_FILE = "trial_state.pt"
BEST_FILE = "best_model.pt"  # a trial's last checkpoint, after its end: {"best_step", "best_model_state"}
DEGENERATE_RESULT = (
    "degenerate"  # in a trial's last Tune result: its best evaluation was a degenerate predictor
)
FAILED_RESULT = "failed"  # in the result a trial that failed for good ends with: it is no evaluation
# In every Tune result of a trial: its MLflow run, which the driver reads by id when the trial ends
# (`callbacks.TrialRecords`) instead of searching the sweep's runs by tags.
RUN_ID_RESULT = "mlflow_run_id"
RAY_NODE = "dicelab.ray_node"  # tag: the Ray node the trial (last) ran on
NODE_IP = "dicelab.node_ip"  # tag: that node's address
WORKER_PID = "dicelab.worker_pid"  # tag: its worker process on that node
GPU_IDS = "dicelab.gpu_ids"  # tag: the GPU ids Ray assigned the trial, comma-separated (only when it has any)


@dataclass(frozen=True)
class SweepContext:
    """What every trial of a sweep shares (picklable; Tune stores it with the experiment for --resume)."""

    plan: SweepPlan
    sweep_name: str
    sweep_id: str
    parent_run_id: str
    experiment_id: str
    tracking_uri: str
    metric: str  # the dev metric Tune optimises, without prefix ("f1")
    cpus_per_trial: float
    plugins: tuple[Pin, ...] = ()  # the driver's plugins: each trial imports and checks them first

    @property
    def tune_metric(self) -> str:
        return names.dev_metric(self.metric)

    def trial_tags(self, trial_id: str) -> dict[str, str]:
        return {names.SWEEP_NAME: self.sweep_name, names.SWEEP_ID: self.sweep_id, names.TRIAL_ID: trial_id}


def point_of(tune_config: dict[str, Any], plan: SweepPlan) -> Point:
    """The trial's point from its Tune config (a point up front, or a searcher's parameters plus a seed
    index: the algorithm's `point_of`)."""
    return plan.algorithm.point_of(tune_config, plan)


def run_name(overrides: Point) -> str:
    """E.g. "tversky alpha=0.3 beta=0.7 seed=1": the loss, then the last part of each other swept key."""
    parts = [str(overrides[LOSS_KEY])] if LOSS_KEY in overrides else []
    # the seed last (a stable sort keeps the order of the others)
    others = sorted((key for key in overrides if key != LOSS_KEY), key=lambda key: key == SEED_KEY)
    # a sampled float to 6 significant digits, as the analysis shows it ("gamma=2.53318")
    parts += [f"{key.rsplit('.', 1)[-1]}={format_value(overrides[key])}" for key in others]
    return " ".join(parts) or "trial"


def trial_config(context: SweepContext, point: Point) -> tuple[ExperimentConfig, Point]:
    """The trial's validated config and its overrides; torch threads default to the trial's CPUs."""
    config, overrides = context.plan.resolve(point)
    if config.train.num_threads is None:
        config.train.num_threads = max(1, int(context.cpus_per_trial))
    return config, overrides


class TuneReporter(Reporter):
    """Reports each evaluation to Tune: its metrics, with a checkpoint of the training state when
    `checkpoint_interval_s` has passed since the trial's start or its last checkpoint (0: every time).

    When Tune stops the trial (ASHA), the report raises `TrialStopped` (`ray_adapter.report`), which ends the
    trial at once as scheduler_stopped (`tune_trial` then ends the thread; Tune reuses the worker for the next
    trial only then).
    """

    def __init__(self, checkpoint_interval_s: float = 0.0, run_id: str | None = None) -> None:
        self.degenerate: str | None = None  # set before the last report when the trial's best was degenerate
        self.checkpoint_interval_s = checkpoint_interval_s
        self.run_id = run_id  # the trial's MLflow run, in each result (RUN_ID_RESULT)
        self.last_checkpoint = time.monotonic()
        # The sweep saves its winner's model from the trial's last checkpoint (search.save_model), so the
        # trial's last report carries a checkpoint whenever its best state is newer than the last one.
        self.latest: Evaluation | None = None
        self.best_unsaved = False

    def on_evaluation(self, evaluation: Evaluation, *, end: TrialResult | None = None) -> None:
        """end: the trial's result when this is its last report, made after its end (its model and optimizer
        are gone then): the checkpoint, when its best state is newer than the last one, holds that state."""
        result: dict[str, Any] = {
            names.dev_metric(key): value
            for key, value in evaluation.metrics.items()
            if key != names.TRAIN_LOSS
        }
        if self.degenerate:
            result[DEGENERATE_RESULT] = True
        if self.run_id is not None:
            result[RUN_ID_RESULT] = self.run_id
        result.update(evaluation.train_metrics)
        result.update({names.EPOCH: evaluation.epoch, "step": evaluation.step})
        self.latest = evaluation
        self.best_unsaved = self.best_unsaved or evaluation.is_best
        where = f" at step {evaluation.step}"  # a stop raises TrialStopped (see ray_adapter.report)
        due = time.monotonic() - self.last_checkpoint >= self.checkpoint_interval_s
        if not (self.best_unsaved if end is not None else due):
            ray_adapter.report(result, where=where)
            return
        with tempfile.TemporaryDirectory(prefix="dicelab-checkpoint-") as directory:
            if end is None:
                torch.save(evaluation.state(), Path(directory) / STATE_FILE)
            else:
                best = {"best_step": end.best_step, "best_model_state": end.best_model_state}
                torch.save(best, Path(directory) / BEST_FILE)
            ray_adapter.report(result, directory, where=where)
        self.last_checkpoint = time.monotonic()
        self.best_unsaved = False

    @staticmethod
    def report_failure(metric: str, run_id: str) -> None:
        """A trial that failed for good still ends with a result holding the metric (Tune requires one):
        NaN, which searchers and schedulers read as "no value"; flagged, so that it is not counted as one of
        the trial's evaluations (`evaluations`)."""
        tune.report({metric: float("nan"), FAILED_RESULT: True, RUN_ID_RESULT: run_id})


def evaluations(result: dict[str, Any]) -> int | None:
    """The dev evaluations a trial reported, read from its last Tune result: Tune counts every report, and
    the closing result of a trial that failed for good (`report_failure`) is none. None before any result."""
    reports = result.get("training_iteration")
    if reports is None:
        return None
    return int(reports) - 1 if result.get(FAILED_RESULT) else int(reports)


class TrialReporter(Reporter):
    """MLflow first, then Tune: when Tune stops the trial at an evaluation (ASHA), that evaluation is
    already recorded, and nothing more is: the trial's thread must end at once (Tune may reuse or kill its
    worker), and the driver records the scheduler_stopped run (`callbacks.TrialRecords`).

    The last evaluation goes to Tune only after the MLflow run is complete: a scheduler stops a trial that
    reaches its budget (ASHA's max_t) at that report, and a trial that trained to the end must still end as
    completed, with its predictions and per-class report."""

    def __init__(self, tune_reporter: TuneReporter, mlflow_reporter: MlflowReporter):
        self.tune, self.mlflow = tune_reporter, mlflow_reporter
        self.ended = False
        self.steps_total: int | None = None
        self.last: Evaluation | None = None

    def on_start(self, config: ExperimentConfig, info: dict[str, Any]) -> None:
        self.steps_total = info["steps_total"]
        self.mlflow.on_start(config, info)

    def on_evaluation(self, evaluation: Evaluation) -> None:
        self.mlflow.on_evaluation(evaluation)
        if evaluation.step == self.steps_total:
            self.last = evaluation
        else:
            self.tune.on_evaluation(evaluation)

    def on_end(self, result: TrialResult) -> None:
        self.ended = True
        if result.outcome == State.SCHEDULER_STOPPED:
            return
        self.mlflow.on_end(result)
        self.tune.degenerate = result.degenerate
        if self.last is not None:
            self.tune.on_evaluation(
                self.last, end=result
            )  # a SystemExit from Tune here ends a finished trial
        elif self.tune.best_unsaved and self.tune.latest is not None:  # stopped early by its own patience
            self.tune.on_evaluation(self.tune.latest, end=result)


def _open_run(
    client: MlflowClient, context: SweepContext, trial_id: str, config: ExperimentConfig, overrides: Point
) -> TrialRun | None:
    """The trial's child run: the existing one (a retry, or a resumed sweep; its reporter reopens it), else
    a new one.

    None when the existing run is in a final state: the trial ended in an earlier session of the sweep,
    shortly before its driver was killed and before Tune saved that (MLflow is the record of truth).
    """
    run = records.find_trial_run(client, context.experiment_id, context.sweep_id, trial_id)
    if run is None and context.plan.racing is not None:
        # A race gives each (configuration, seed) once. A driver killed after starting a trial and before
        # Tune saved it leaves that trial's run behind; the resumed race starts the same configuration and
        # seed under a new trial id, which takes the run over instead of duplicating it.
        flat = flatten_config(config)
        run = records.find_point_run(
            client, context.experiment_id, context.sweep_id, {key: flat[key] for key in overrides}
        )
        if run is not None:
            client.set_tag(run.info.run_id, names.TRIAL_ID, trial_id)
    if run is None:
        run_id = records.create_trial_run(
            client,
            context.experiment_id,
            run_name=run_name(overrides),
            parent_run_id=context.parent_run_id,
            tags=context.trial_tags(trial_id),
            params=flatten_config(config),
        )
        return TrialRun(client, run_id, State.RUNNING)
    if is_final(state_of(run)):
        dev = {
            key: value
            for key, value in run.data.metrics.items()
            if key.startswith((names.DEV_PREFIX, names.BEST_PREFIX))
        }
        flag = {DEGENERATE_RESULT: True} if names.DEGENERATE in run.data.tags else {}
        tune.report({context.tune_metric: float("nan"), **dev, **flag, RUN_ID_RESULT: run.info.run_id})
        return None
    return TrialRun.of(client, run)


def _restored_state() -> dict[str, Any] | None:
    """The training state of Tune's checkpoint for this trial, if any.

    A driver killed between Tune deleting a trial's older checkpoint (num_to_keep=1) and saving the
    experiment state leaves that state pointing at the deleted one: the trial then starts over (its
    evaluations are logged again, with the same values on CPU) instead of failing on every retry."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return None
    try:
        with checkpoint.as_directory() as directory:
            return torch.load(Path(directory) / STATE_FILE, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        logging.getLogger(__name__).warning("checkpoint %s is gone: the trial starts over", checkpoint.path)
        return None


def _placement(context: SweepContext) -> tuple[TrialResources, dict[str, str]]:
    """What Ray gave the trial (its GPU share and ids: the trial charges GPU-seconds by the share, and trains
    on CPU, saying so, when CUDA cannot see the ids) and the tags that say where it ran."""
    gpu_ids = tuple(str(gpu) for gpu in ray.get_gpu_ids())
    node_id = ray.get_runtime_context().get_node_id()
    # The address the node registered with (`ray start --node-ip-address`), not the machine's first one.
    address = next(
        (node["NodeManagerAddress"] for node in ray.nodes() if node["NodeID"] == node_id),
        ray.util.get_node_ip_address(),
    )
    where = {RAY_NODE: node_id, NODE_IP: address, WORKER_PID: str(os.getpid())}
    if gpu_ids:
        where[GPU_IDS] = ",".join(gpu_ids)
    return TrialResources(gpu_fraction=context.plan.search.resources.gpu, gpu_ids=gpu_ids), where


def tune_trial(tune_config: dict[str, Any], *, context: SweepContext, inputs: dict[str, Any]) -> None:
    """The function Tune runs for each trial. `inputs`: inputs_key -> ObjectRef of prepared TrialInputs."""
    if ray_adapter.tuning_on():  # a trial worker is dicelab's own process: fewer, shorter collections
        garbage.for_this_process()
        garbage.freeze_imported()
    # One INFO line per checkpoint, and a progress bar per weights loading, forwarded to the driver's
    # terminal, would bury the sweep's own view.
    ray_adapter.quiet_checkpoint_logs()
    ray_adapter.wait_for_stopped_trial_threads()  # so that a stopped trial's worker takes the next trial
    transformers.utils.logging.disable_progress_bar()
    import_pinned(context.plugins)  # a version other than the driver's fails the trial, saying so
    config, overrides = trial_config(context, point_of(tune_config, context.plan))
    trial_id = tune.get_context().get_trial_id()
    client = MlflowClient(context.tracking_uri)
    opened = _open_run(client, context, trial_id, config, overrides)
    if opened is None:
        return
    mlflow_reporter = MlflowReporter(
        context.tracking_uri,
        context.sweep_name,
        parent_run_id=context.parent_run_id,
        tags=context.trial_tags(trial_id),
        run_id=opened.run_id,
        log_predictions=config.tracking.log_predictions,
    )
    tune_reporter = TuneReporter(context.plan.search.checkpoint_interval_s, run_id=opened.run_id)
    reporter = TrialReporter(tune_reporter, mlflow_reporter)
    resources, where = _placement(context)
    client.log_batch(opened.run_id, tags=[RunTag(key, value) for key, value in where.items()])
    try:
        state = _restored_state()  # the MLflow reporter records its step when it reopens the run
        key = inputs_key(config)
        trial_inputs = ray.get(inputs[key]) if key in inputs else None  # else built here (disk cache)
        run_trial(config, reporter, inputs=trial_inputs, resume_state=state, resources=resources)
    except TrialStopped:
        ray_adapter.end_stopped_trial()
    except (TrialFailed, DicelabError) as error:
        if not reporter.ended:  # failed before the trial started: its run was not reopened yet
            trial_run = mlflow_reporter.run or opened
            trial_run.send(Event.FAIL, reason=first_line(error, with_type=True))
        TuneReporter.report_failure(context.tune_metric, opened.run_id)
    except BaseException as error:
        if not reporter.ended:
            trial_run = mlflow_reporter.run or opened
            trial_run.send(Event.FAIL, reason=first_line(error, with_type=True))
        raise
