"""Ray Tune wiring of a sweep plan: trainable with resources, search algorithm, scheduler, run config."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, TrialScheduler
from ray.tune.search import Repeater, Searcher

from dicelab.sweeps.race_searcher import RaceSearcher
from dicelab.sweeps.racing import Race, RaceSettings
from dicelab.sweeps.result_log import ResultLog
from dicelab.sweeps.space import SweepPlan
from dicelab.sweeps.trainable import SweepContext, run_name, tune_trial
from dicelab.sweeps.tune_storage import StateKeeper, prepare_resume
from dicelab.tracking import conventions as names

SAVE_PERIOD_ENV = "TUNE_GLOBAL_CHECKPOINT_S"  # read by Tune's controller when the sweep starts
SAVE_PERIOD_PER_TRIAL_S = 0.05  # Tune's experiment state is saved every 50 ms per planned trial, ...
SAVE_PERIOD_MIN_S = 1.0  # ... and at most every second


def experiment_save_period_s(trials: int) -> float:
    """Seconds between Tune's periodic saves of its experiment state for a sweep of `trials` trials.

    Each save writes every trial's state (O(N)) and a sweep of N trials lasts O(N), so a fixed period makes
    the saves O(N²) in all; a period proportional to N keeps their number flat and their cost O(N): 1 s up
    to 20 trials, 5 s at 100, 50 s at 1,000. What a killed driver can lose is that period of Tune's
    bookkeeping: trials handed out since the last save run again under new ids on `--resume` (the race
    comes back from the same save, so it hands their seeds out again). A trial's checkpoint still makes Tune
    save at once (it keeps one checkpoint per trial), so no finished trial with a checkpoint is lost."""
    return max(SAVE_PERIOD_MIN_S, SAVE_PERIOD_PER_TRIAL_S * trials)


def set_experiment_save_period(plan: SweepPlan) -> None:
    os.environ[SAVE_PERIOD_ENV] = f"{experiment_save_period_s(plan.num_trials):g}"


def trial_dirname(trial: Trial) -> str:
    return trial.trial_id  # the default (config in the name) breaks on long points and odd characters


def trainable(context: SweepContext, inputs: dict[str, Any]) -> Any:
    resources = context.plan.search.resources
    return tune.with_resources(
        tune.with_parameters(tune_trial, context=context, inputs=inputs),
        {"cpu": resources.cpu, "gpu": resources.gpu},
    )


def search_algorithm(plan: SweepPlan, metric: str, directory: Path) -> Searcher | None:
    """The seed race; else the algorithm's searcher (repeated once per seed), None when Tune runs its points
    as a grid (see `dicelab.sweeps.algorithms`).

    `metric` is the dev metric without prefix ("f1")."""
    if plan.racing is not None:
        return race_searcher(plan, metric, directory)
    searcher = plan.algorithm.searcher(plan, names.dev_metric(metric), plan.mode)
    if searcher is not None and plan.seeds is not None:
        searcher = Repeater(searcher, repeat=len(plan.seeds), set_index=True)
    return searcher


def race_searcher(plan: SweepPlan, metric: str, directory: Path) -> RaceSearcher:
    racing = plan.racing
    assert racing is not None
    points = plan.points()
    settings = RaceSettings(
        **racing.model_dump(), higher_is_better=plan.mode == "max", time_budget_s=plan.search.time_budget_s
    )
    labels = [run_name(plan.trial_data(point)[1]) for point in points]
    race = Race(settings, labels, started_at=plan.started)  # the budget counts from the sweep's start
    return RaceSearcher(race, points, metric, plan.mode, directory)


def _tune_time_budget(plan: SweepPlan) -> float | None:
    """Tune's time_budget_s for a sweep that does not race: what is left of search.time_budget_s (it counts
    from the sweep's start, Tune's from its own)."""
    left = plan.time_left()
    return None if left is None or plan.racing is not None else max(1.0, left)


def scheduler(plan: SweepPlan, epochs: int) -> TrialScheduler | None:
    options = plan.search.scheduler
    if options.name == "fifo":
        return None
    return ASHAScheduler(
        time_attr="training_iteration",  # one iteration = one dev evaluation
        max_t=options.max_t or epochs,
        grace_period=options.grace_period,
        reduction_factor=options.reduction_factor,
    )


def param_space(plan: SweepPlan) -> dict[str, Any]:
    return plan.algorithm.param_space(plan)


def tune_config(context: SweepContext, directory: Path) -> tune.TuneConfig:
    plan = context.plan
    return tune.TuneConfig(
        metric=context.tune_metric,
        mode=plan.mode,
        # A race keeps its own time budget: it hands out no seed that would not end in time, and lets the
        # running ones end (Tune's would stop them mid-training).
        time_budget_s=_tune_time_budget(plan),
        search_alg=search_algorithm(plan, context.metric, directory),
        scheduler=scheduler(plan, plan.base["train"]["epochs"]),
        num_samples=plan.algorithm.num_samples(plan),
        max_concurrent_trials=plan.search.max_concurrent,
        # by default a new trial reuses a finished trial's worker: no second import of torch
        reuse_actors=plan.search.reuse_actors,
        trial_dirname_creator=trial_dirname,
    )


def run_config(plan: SweepPlan, directory: Path, callbacks: list[tune.Callback]) -> tune.RunConfig:
    search = plan.search
    return tune.RunConfig(
        name=directory.name,
        storage_path=str(directory.parent),
        failure_config=tune.FailureConfig(max_failures=search.max_failures),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        # None of Tune's loggers (the driver sets TUNE_DISABLE_AUTO_CALLBACK_LOGGERS): the result.json that
        # the ResultGrid reads is ResultLog's, outside the staging copy that each of Tune's saves uploads;
        # CSV repeats it, and TensorBoard's writer cost the driver a second of CPU per sweep minute.
        # StateKeeper last: it reports a full storage after the other callbacks' last lines.
        callbacks=[
            *callbacks,
            ResultLog(),
            StateKeeper(directory, plan.source, experiment_save_period_s(plan.num_trials)),
        ],
        verbose=0,
    )


def build_tuner(
    context: SweepContext,
    inputs: dict[str, Any],
    directory: Path,
    callbacks: list[tune.Callback],
) -> tune.Tuner:
    plan = context.plan
    set_experiment_save_period(plan)
    return tune.Tuner(
        trainable(context, inputs),
        param_space=param_space(plan),
        tune_config=tune_config(context, directory),
        run_config=run_config(plan, directory, callbacks),
    )


def restore_tuner(
    context: SweepContext, inputs: dict[str, Any], directory: Path, retry_failed: bool = False
) -> tune.Tuner:
    """Continue an interrupted sweep: finished trials stay as they are, unfinished ones continue from their
    last checkpoint, and errored ones too with `retry_failed` (after a full disk, a lost node, ...), else
    they stay failed. The callbacks come back with the experiment.

    Tune's state files that a full disk cut short are put back from their last good copies first. Without
    one, Tune would silently start the sweep over with new trials (and new runs): that is refused."""
    prepare_resume(directory)
    set_experiment_save_period(context.plan)
    return tune.Tuner.restore(
        str(directory), trainable(context, inputs), resume_unfinished=True, resume_errored=retry_failed
    )
