"""A sweep's MLflow parent run: opened with the sweep's config, versions and commit; closed with trial counts
and the best metric; its trials' run names labelled with their results; the sweep's closing lines.

Imported by the driver's set-up thread, not at the driver's start: MLflow's import (a second on 2 cores)
would otherwise delay Ray's start.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run, RunTag
from rich.console import Console

from dicelab.config import ExperimentConfig, config_to_yaml, flatten_config
from dicelab.sweeps import records
from dicelab.sweeps.space import LOSS_KEY, SEED_KEY, SweepPlan
from dicelab.sweeps.state import SweepState
from dicelab.sweeps.winner import sweep_mode, value_of
from dicelab.tracking import conventions as names
from dicelab.tracking import ensure_experiment, lifecycle, links
from dicelab.tracking.lifecycle import Event, ParentRun

VERSIONED_PACKAGES = ("dicelab", "torch", "ray", "mlflow", "transformers")
# The sweep's cost on its parent run: the trials' resource-seconds summed, in hours, and how many trials
# reported them (a trial that crashed before its end reports none).
COST_CPU_HOURS = "cost/cpu_hours"
COST_GPU_HOURS = "cost/gpu_hours"
COST_TRIALS = "cost/trials"


def swept_keys(plan: SweepPlan) -> list[str]:
    keys = [LOSS_KEY] if any(branch.loss is not None for branch in plan.branches) else []
    for branch in plan.branches:
        keys += [key for key in [*branch.dimensions, *branch.tied] if key not in keys]
    if plan.seeds is not None or plan.racing is not None:
        keys.append(SEED_KEY)
    return keys


def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _versions() -> dict[str, str]:
    found = {}
    for package in VERSIONED_PACKAGES:
        try:
            found[f"version.{package}"] = version(package)
        except PackageNotFoundError:
            found[f"version.{package}"] = "not installed"
    return found


def open_parent_run(
    client: MlflowClient, experiment_id: str, config: ExperimentConfig, plan: SweepPlan, sweep_id: str
) -> str:
    keys = swept_keys(plan)
    search = plan.search
    params = {key: value for key, value in flatten_config(config).items() if key not in keys}
    params |= {
        "search.algorithm": search.algorithm,
        "search.scheduler": search.scheduler.name,
        "search.trials": plan.num_trials,
        "search.keys": ",".join(keys),
        "search.seeds": search.seeds,
        **({f"search.racing.{k}": v for k, v in search.racing.model_dump().items()} if search.racing else {}),
        "search.metric": search.metric,
        "search.mode": plan.mode,
        **_versions(),
    }
    tags = {names.SWEEP_NAME: config.name, names.SWEEP_ID: sweep_id}
    if search.racing is not None:
        tags[names.RACE_TEST] = search.racing.test
    commit = _git_commit()
    if commit:
        tags[names.GIT_COMMIT] = commit
    run = lifecycle.start_run(
        client,
        experiment_id,
        lifecycle.Kind.PARENT,
        run_name=f"{config.name} {time.strftime('%Y-%m-%d %H:%M')}",
        tags=tags,
    )
    items = [Param(key, records.clip(value, 6000)) for key, value in params.items()]
    for start in range(0, len(items), 100):
        client.log_batch(run.run_id, params=items[start : start + 100])
    client.log_text(run.run_id, config_to_yaml(config), names.CONFIG_ARTIFACT)
    return run.run_id


def close_parent_run(
    client: MlflowClient, state: SweepState, runs: list[Run], metric: str, interrupted: bool
) -> Counter[str]:
    """Sweep-level metrics (trial counts, best metric) and the parent's status; returns the outcome counts."""
    outcomes = Counter(records.outcome_of(run) for run in runs)
    values = {f"trials_{outcome}": float(count) for outcome, count in outcomes.items()}
    values |= cost_totals(runs)
    best = best_run(runs, metric)
    if best is not None:
        values[names.best_metric(metric)] = best.data.metrics[names.best_metric(metric)]
    now = int(time.time() * 1000)
    client.log_batch(
        state.parent_run_id,
        metrics=[Metric(key, value, now, 0) for key, value in values.items()],
        tags=[RunTag(names.PRIMARY_METRIC, metric)],
    )
    succeeded = outcomes[names.COMPLETED] + outcomes[names.EARLY_STOPPED]
    ending = Event.INTERRUPT if interrupted else Event.COMPLETE if succeeded else Event.FAIL
    ParentRun(client, state.parent_run_id).send(ending)
    return outcomes


def end_parent_run(client: MlflowClient, state: SweepState, error: BaseException) -> None:
    """The parent run of a sweep whose driver raised `error`: interrupted by Ctrl-C, else failed."""
    ending = Event.INTERRUPT if isinstance(error, KeyboardInterrupt) else Event.FAIL
    ParentRun(client, state.parent_run_id).send(ending)


def cost_totals(runs: list[Run]) -> dict[str, float]:
    """The trials' CPU- and GPU-seconds summed, in hours, with the number of trials that reported them;
    empty when none did."""
    costed = [run.data.metrics for run in runs if names.COST_WALL_SECONDS in run.data.metrics]
    if not costed:
        return {}
    return {
        COST_CPU_HOURS: sum(metrics.get(names.COST_CPU_SECONDS, 0.0) for metrics in costed) / 3600,
        COST_GPU_HOURS: sum(metrics.get(names.COST_GPU_SECONDS, 0.0) for metrics in costed) / 3600,
        COST_TRIALS: float(len(costed)),
    }


def best_run(runs: list[Run], metric: str) -> Run | None:
    """The usable run with the best best_dev_<metric>: the highest, or the lowest in a sweep whose mode is
    min (the trials' train.mode). Usable as the winner and the analysis count trials (`winner.value_of`); a
    trial that failed or was interrupted after some evaluations has a best_dev_<metric> too, and is not a
    result."""
    scored = [(value, run) for run in runs if (value := value_of(run, metric)) is not None]
    pick = min if sweep_mode(None, runs) == "min" else max
    return pick(scored, key=lambda pair: pair[0])[1] if scored else None


def label_trial_runs(client: MlflowClient, runs: list[Run], metric: str) -> None:
    """Each trial's run name gets its result, "dsc alpha=0.5 seed=1 · f1 0.6235" (or "· failed", ...; see
    `lifecycle.result_label`). Idempotent on --resume."""
    for run in runs:
        lifecycle.label(client, run, metric)


def print_closing(
    console: Console, state: SweepState, runs: list[Run], outcomes: Counter[str], metric: str, uri: str
) -> None:
    """The sweep's last lines: what happened, the best trial, and how to look at it."""
    counts = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items())) or "none ran"
    lines = [f"trials: {counts}"]
    best = best_run(runs, metric)
    if best is not None:
        key = names.best_metric(metric)
        name, value = lifecycle.base_name(best), best.data.metrics[key]
        lines.append(f"best:   {name} · {key} {value:.4f} · run {best.info.run_id} (the best single trial)")
    cost = cost_totals(runs)
    if cost:
        costed = int(cost[COST_TRIALS])
        # a trial that crashed or was refused before training logged none: the sum is over the others
        trials = f"{costed} trials" if costed == len(runs) else f"{costed} of {len(runs)} trials logged one"
        lines.append(
            f"cost:   {names.resource_hours(cost[COST_CPU_HOURS], 'CPU', 3)}, "
            f"{names.resource_hours(cost[COST_GPU_HOURS], 'GPU', 3)} ({trials})"
        )
    if uri.startswith(("http://", "https://")):
        lines.append(f"UI:     {links.experiment_url(uri, state.experiment_id, metric)}")
    else:
        lines.append(f"UI:     dicelab ui --experiment {state.name}  (its trials, best {metric} first)")
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def model_line(
    runs: list[Run], winner_run_id: str | None, uri: str, seconds: float, reused: bool = False
) -> str:
    """The closing line of the winner's saved model, naming its trial: the winner is the best seed of the
    configuration with the best mean over seeds, often not the `best:` line's single best trial.
    `reused`: the model was saved before (a finished sweep resumed), not again."""
    winner = next((run for run in runs if run.info.run_id == winner_run_id), None)
    label = lifecycle.base_name(winner) if winner else ""
    of = f"{label} (the winner) · " if label else ""
    return f"model:  {of}{uri} ({'saved before, kept' if reused else f'saved in {seconds:.1f} s'})"


def end_running_trials(client: MlflowClient, state: SweepState, config_path: str, why: str) -> None:
    """Trials stop with the driver: their runs must not stay RUNNING in the UI (--resume reopens them)."""
    runs = records.trial_runs(client, state.experiment_id, state.sweep_id)
    records.mark_interrupted(client, runs, f"{why}; continue with: dicelab sweep {config_path} --resume")


def start_or_resume(
    client: MlflowClient,
    config: ExperimentConfig,
    plan: SweepPlan,
    sweep_root: Path,
    config_yaml: str,
    tracking_uri: str,
    resumed: tuple[SweepState, Path] | None,
) -> tuple[SweepState, Path]:
    """A new sweep: experiment, parent run and state directory. --resume: the newest one, reopened."""
    if resumed is not None:
        state, directory = resumed
        ParentRun.of(client, client.get_run(state.parent_run_id)).send(Event.RESUME)
        last_section = next(reversed(flatten_config(config))).split(".")[0]
        records.discard_cut_short(client, state.experiment_id, state.sweep_id, last_section)
        return state, directory
    experiment_id = ensure_experiment(client, config.name)
    sweep_id = SweepState.new_id()
    parent_run_id = open_parent_run(client, experiment_id, config, plan, sweep_id)
    digest = SweepState.digest(config_yaml)
    state = SweepState(
        sweep_id, config.name, experiment_id, parent_run_id, tracking_uri, digest, time.ctime()
    )
    directory = SweepState.new_directory(sweep_root, sweep_id)
    state.save(directory, config_yaml)
    return state, directory
