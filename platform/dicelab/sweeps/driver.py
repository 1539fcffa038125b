"""`dicelab sweep`: validate the sweep, open its MLflow parent run, start or join Ray, build the inputs once,
run the trials through Ray Tune, and close the parent run with a summary.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run, RunTag
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dicelab.config import ExperimentConfig, config_to_yaml, flatten_config
from dicelab.errors import ConfigError
from dicelab.experiment import load_experiment
from dicelab.sweeps import local_ray, records
from dicelab.sweeps.race_records import log_race, read_race
from dicelab.sweeps.space import LOSS_KEY, SEED_KEY, SweepPlan, plan_sweep
from dicelab.sweeps.state import SweepState
from dicelab.tracking import check_tracking, ensure_experiment, links, resolve_tracking_uri
from dicelab.tracking import conventions as names
from dicelab.tracking.store import STORE_DIR

RESULTS_DIR = "ray_results"
VERSIONED_PACKAGES = ("dicelab", "torch", "ray", "mlflow", "transformers")


@dataclass
class SweepOptions:
    config: str
    overrides: list[str] = field(default_factory=list)
    address: str | None = None  # None: $RAY_ADDRESS, else a new local Ray; "auto"; "HOST:PORT"
    name: str | None = None
    resume: bool = False
    retry_failed: bool = False  # with resume: failed trials run again from their last checkpoint
    tracking_uri: str | None = None


# ----------------------------------------------------------------------------------------------------------
# Config


def load_sweep_config(options: SweepOptions) -> ExperimentConfig:
    overrides = list(options.overrides)
    if options.name:
        overrides += [f"name={options.name}", f"tracking.experiment={options.name}"]
    config = load_experiment(options.config, overrides)
    if config.search is None:
        raise ConfigError(f"{options.config}: a sweep config needs a search: section (see docs: sweeps)")
    _absolute_paths(config)
    return config


def _absolute_paths(config: ExperimentConfig) -> None:
    """Trials run in other directories (Tune's trial dirs, other nodes): relative paths are made absolute."""
    data = config.data
    data.cache_dir = str(Path(data.cache_dir).resolve())
    if data.path is not None:
        data.path = str(Path(data.path).resolve())
    if Path(config.model.backbone).exists():
        config.model.backbone = str(Path(config.model.backbone).resolve())


def swept_keys(plan: SweepPlan) -> list[str]:
    keys = [LOSS_KEY] if any(branch.loss is not None for branch in plan.branches) else []
    for branch in plan.branches:
        keys += [key for key in [*branch.dimensions, *branch.tied] if key not in keys]
    if plan.seeds is not None or plan.racing is not None:
        keys.append(SEED_KEY)
    return keys


# ----------------------------------------------------------------------------------------------------------
# MLflow parent run


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
        **_versions(),
    }
    tags = {names.ROLE: names.ROLE_PARENT, names.SWEEP_NAME: config.name, names.SWEEP_ID: sweep_id}
    if search.racing is not None:
        tags[names.RACE_TEST] = search.racing.test
    commit = _git_commit()
    if commit:
        tags[names.GIT_COMMIT] = commit
    run = client.create_run(
        experiment_id, run_name=f"{config.name} {time.strftime('%Y-%m-%d %H:%M')}", tags=tags
    )
    items = [Param(key, records.clip(value, 6000)) for key, value in params.items()]
    for start in range(0, len(items), 100):
        client.log_batch(run.info.run_id, params=items[start : start + 100])
    client.log_text(run.info.run_id, config_to_yaml(config), names.CONFIG_ARTIFACT)
    return run.info.run_id


def close_parent_run(
    client: MlflowClient, state: SweepState, runs: list[Run], metric: str, interrupted: bool
) -> Counter[str]:
    """Sweep-level metrics (trial counts, best metric) and the parent's status; returns the outcome counts."""
    outcomes = Counter(records.outcome_of(run) for run in runs)
    values = {f"trials_{outcome}": float(count) for outcome, count in outcomes.items()}
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
    status = records.KILLED if interrupted else records.FINISHED if succeeded else records.FAILED
    client.set_terminated(state.parent_run_id, status=status)
    return outcomes


def best_run(runs: list[Run], metric: str) -> Run | None:
    """The run with the highest best_dev_<metric> (every dev metric is a score: higher is better)."""
    key = names.best_metric(metric)
    scored = [run for run in runs if key in run.data.metrics]
    if not scored:
        return None
    return max(scored, key=lambda run: run.data.metrics[key])


# ----------------------------------------------------------------------------------------------------------
# Ray


def connect_ray(address: str | None) -> None:
    """Join a cluster (`auto`, `HOST:PORT`, or $RAY_ADDRESS), else start a private local Ray that dies with
    this driver (see `local_ray`)."""
    import ray

    import dicelab

    quiet = {"logging_level": logging.WARNING, "configure_logging": True}
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        # "local", never None: None would join whatever cluster was started last on this machine.
        # Ray's own default (token authentication) is kept; its warning that it is the default is not news.
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
        # Ray starts one worker per CPU twice: with the raylet (for no job) and for this driver's job, whose
        # workers host the trials. The first set is idle CPU and memory here: only the second is started.
        system = {"enable_worker_prestart": False}
        ray.init(address="local", include_dashboard=False, _system_config=system, **quiet)
        session_dir = Path(ray._private.worker._global_node.get_session_dir_path())
        local_ray.reap_leftovers(session_dir.parent)  # of earlier drivers killed before their watchdog ran
        local_ray.record(session_dir, ray.get_runtime_context().get_node_id())
    elif address == "auto":
        ray.init(address="auto", **quiet)
    else:
        # Ship this version of dicelab to the cluster's workers (small: the package directory only).
        ray.init(address=address, runtime_env={"py_modules": [dicelab]}, **quiet)


def build_inputs(plan: SweepPlan, console: Console) -> list[tuple[str, ExperimentConfig, Any]]:
    """Build each distinct set of trial inputs once, in the driver: [(inputs_key, config, TrialInputs)]."""
    from dicelab.training import inputs_key, prepare_inputs

    groups: dict[str, ExperimentConfig] = {}
    for point in plan.probe_points():
        config = plan.trial_config(point)
        groups.setdefault(inputs_key(config), config)
    import datasets

    datasets.disable_progress_bars()  # the spinner below says what is being built
    built = []
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        for index, (key, config) in enumerate(groups.items(), 1):
            progress.add_task(
                f"preparing inputs {index}/{len(groups)}: {_describe_inputs(config)}", total=None
            )
            built.append((key, config, prepare_inputs(config)))
    return built


def share_inputs(
    built: list[tuple[str, ExperimentConfig, Any]], console: Console
) -> tuple[dict[str, Any], list[Any]]:
    """Put each set of inputs in Ray's object store once.

    Returns ({inputs_key: ObjectRef}, [(config, label names)] per set)."""
    import ray

    refs = {key: ray.put(inputs) for key, _, inputs in built}
    console.print(f"inputs: {len(built)} set(s) built once and shared through Ray's object store")
    return refs, [(config, inputs.label_names) for _, config, inputs in built]


def _describe_inputs(config: ExperimentConfig) -> str:
    data = config.data
    source = data.name or data.path or data.source
    return f"{source} variant={data.variant} backbone={config.model.backbone}"


def resolve_metric(plan: SweepPlan, prepared: list[Any]) -> str:
    if plan.metric is not None:
        return plan.metric
    from dicelab.tasks import TASKS

    metrics = {TASKS.get(config.task.name)().primary_metric(labels) for config, labels in prepared}
    if len(metrics) != 1:
        raise ConfigError(
            f"{plan.source}: config key 'search.metric': trials have different primary metrics "
            f"({', '.join(sorted(metrics))}); set search.metric"
        )
    return metrics.pop()


# ----------------------------------------------------------------------------------------------------------
# The sweep


def run_sweep(options: SweepOptions, console: Console | None = None) -> int:
    """Run (or with options.resume continue) a sweep; the exit code: 0 when at least one trial succeeded,
    1 when every trial failed, 130 when interrupted."""
    import ray

    console = console or Console()
    config = load_sweep_config(options)
    plan = plan_sweep(config, options.config)
    storage = plan.search.storage or str(Path(STORE_DIR) / RESULTS_DIR)
    sweep_root = Path(storage).expanduser().resolve() / config.name
    config_yaml = config_to_yaml(config)
    tracking_uri = resolve_tracking_uri(options.tracking_uri, config)
    server = tracking_uri.startswith(("http://", "https://"))
    if server:  # one /health request: a server that is down is the first thing to say, even on --resume
        check_tracking(tracking_uri)
    resumed = _sweep_to_resume(sweep_root, config_yaml) if options.resume else None
    opened: list[tuple[MlflowClient, SweepState, Path]] = []  # by the set-up, once the parent run exists

    def set_up() -> list[tuple[str, ExperimentConfig, Any]]:
        """Everything but Ray before the trials: the store, the parent run, the inputs, Tune's imports."""
        if not server:  # a SQLite store's schema is created or migrated here, while Ray starts
            check_tracking(tracking_uri)
        client = MlflowClient(tracking_uri)
        state, directory = _start_or_resume(
            client, config, plan, sweep_root, config_yaml, tracking_uri, resumed
        )
        opened.append((client, state, directory))
        _print_header(console, options, config, plan, _mlflow_location(tracking_uri, state))
        built = build_inputs(plan, console)
        import dicelab.sweeps.tuning  # noqa: F401  (torch, transformers, Tune: for _fit, while Ray starts)

        return built

    try:
        # Ray's start (seconds of its processes starting, mostly waiting) overlaps the set-up (a new
        # store's schema, imports, tokenization). The set-up runs to its end even when Ray fails to start.
        with ThreadPoolExecutor(1, thread_name_prefix="dicelab-set-up") as pool:
            setting_up = pool.submit(set_up)
            connect_ray(options.address)
            built = setting_up.result()
        client, state, directory = opened[0]
        where = _mlflow_location(tracking_uri, state)
        inputs, prepared = share_inputs(built, console)
        metric = resolve_metric(plan, prepared)
        grid = _fit(plan, state, metric, inputs, directory, where, options.resume, options.retry_failed)
    except BaseException as error:
        if opened:  # the parent run exists: it ends with the sweep
            client, state, _ = opened[0]
            failed = records.KILLED if isinstance(error, KeyboardInterrupt) else records.FAILED
            with contextlib.suppress(Exception):  # a clean-up: the error being raised is the one to report
                why = f"the sweep's driver stopped ({type(error).__name__})"
                _end_running_trials(client, state, options, why)
            client.set_terminated(state.parent_run_id, status=failed)
        raise
    finally:
        if ray.is_initialized():
            ray.shutdown()
        local_ray.release()
    runs = records.trial_runs(client, state.experiment_id, state.sweep_id)
    # Tune returns normally after a Ctrl-C, with the running trials TERMINATED and the rest never created:
    # a trial's run still RUNNING (finished, failed and scheduler-stopped trials all end theirs) or missing
    # trials tell an interrupted sweep from a finished one.
    race = read_race(directory) if plan.racing is not None else None
    expected = len(grid) if race is not None and race.get("decision") else plan.num_trials
    interrupted = (
        any(run.info.status == records.RUNNING for run in runs)
        or len(grid) < expected
        or grid.num_terminated + grid.num_errors < len(grid)
    )
    if interrupted:
        _end_running_trials(client, state, options, "the sweep was interrupted")
        runs = records.trial_runs(client, state.experiment_id, state.sweep_id)
    if race is not None:
        log_race(client, state.parent_run_id, race, runs)
    outcomes = close_parent_run(client, state, runs, metric, interrupted)

    _label_trial_runs(client, runs, metric)
    _print_closing(console, state, runs, outcomes, metric, tracking_uri)
    if race is not None and race.get("decision"):
        console.print(f"race:   {race['decision']['summary']}", highlight=False, soft_wrap=True)
    if interrupted:
        console.print(
            f"interrupted: continue with  dicelab sweep {options.config} --resume  ({directory})",
            highlight=False,
            soft_wrap=True,
        )
        return 130
    return 0 if outcomes[names.COMPLETED] + outcomes[names.EARLY_STOPPED] else 1


def _print_header(
    console: Console, options: SweepOptions, config: ExperimentConfig, plan: SweepPlan, where: str
) -> None:
    import dicelab

    seeds = f" x {len(plan.seeds)} seeds" if plan.seeds else ""
    trials = f"{plan.num_trials} trials ({plan.num_configurations} configurations{seeds})"
    if plan.racing is not None:
        racing = plan.racing
        trials = (
            f"seed race of {plan.num_configurations} configurations ({racing.min_seeds} to "
            f"{racing.max_seeds} seeds each, at most {plan.num_trials} trials, {racing.test} test at "
            f"{racing.confidence:g})"
        )
    resumed = " resumed" if options.resume else ""
    # On a cluster, which copy of dicelab runs matters (an uploaded package, or one installed on the nodes).
    joined = options.address or os.environ.get("RAY_ADDRESS")
    origin = f" from {Path(dicelab.__file__).parent}" if joined else ""
    console.print(
        f"dicelab {dicelab.__version__}{origin} · sweep [bold]{config.name}[/]{resumed}: {trials}, "
        f"{plan.search.algorithm} search, {plan.search.scheduler.name} scheduler",
        highlight=False,
        soft_wrap=True,
    )
    console.print(where, highlight=False, soft_wrap=True)


RESULT_SEPARATOR = " · "


def _label_trial_runs(client: MlflowClient, runs: list[Run], metric: str) -> None:
    """Each trial's run name gets its result, "dsc alpha=0.5 seed=1 · f1 0.6235" (or "· failed", ...): the
    MLflow UI's runs table shows names but no metric column until one is chosen. Idempotent on --resume."""
    key = names.best_metric(metric)
    for run in runs:
        base = (run.info.run_name or "trial").split(RESULT_SEPARATOR)[0]
        outcome = run.data.tags.get(names.OUTCOME)
        if run.info.status == records.KILLED:
            result = "interrupted"
        elif outcome in (names.COMPLETED, names.EARLY_STOPPED) and key in run.data.metrics:
            result = f"{metric} {run.data.metrics[key]:.4f}"
            result += " early stopped" if outcome == names.EARLY_STOPPED else ""
            result += " degenerate" if names.DEGENERATE in run.data.tags else ""
        else:
            result = (outcome or run.info.status.lower()).replace("_", " ")
        name = f"{base}{RESULT_SEPARATOR}{result}"
        if name != run.info.run_name:
            client.set_tag(run.info.run_id, MLFLOW_RUN_NAME, name)


def _print_closing(
    console: Console, state: SweepState, runs: list[Run], outcomes: Counter[str], metric: str, uri: str
) -> None:
    """The sweep's last lines: what happened, the best trial, and how to look at it."""
    counts = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items())) or "none ran"
    lines = [f"trials: {counts}"]
    best = best_run(runs, metric)
    if best is not None:
        key = names.best_metric(metric)
        label = (best.info.run_name or "").split(RESULT_SEPARATOR)[0]
        lines.append(f"best:   {label} · {key} {best.data.metrics[key]:.4f} · run {best.info.run_id}")
    if uri.startswith(("http://", "https://")):
        lines.append(f"UI:     {links.experiment_url(uri, state.experiment_id, metric)}")
    else:
        lines.append(f"UI:     dicelab ui --experiment {state.name}  (its trials, best {metric} first)")
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def _end_running_trials(client: MlflowClient, state: SweepState, options: SweepOptions, why: str) -> None:
    """Trials stop with the driver: their runs must not stay RUNNING in the UI (--resume reopens them)."""
    runs = records.trial_runs(client, state.experiment_id, state.sweep_id)
    records.mark_interrupted(client, runs, f"{why}; continue with: dicelab sweep {options.config} --resume")


def _sweep_to_resume(sweep_root: Path, config_yaml: str) -> tuple[SweepState, Path]:
    """--resume: the newest sweep under sweep_root, which must have been started with the same config."""
    state, directory = SweepState.latest(sweep_root)
    state.check_same_config(directory, config_yaml)
    return state, directory


def _start_or_resume(
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
        client.update_run(state.parent_run_id, status=records.RUNNING)
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


def _fit(
    plan: SweepPlan,
    state: SweepState,
    metric: str,
    inputs: dict[str, Any],
    directory: Path,
    where: str,
    resume: bool,
    retry_failed: bool = False,
) -> Any:
    from ray import tune

    from dicelab.sweeps.callbacks import SweepView, TrialRecords
    from dicelab.sweeps.trainable import SweepContext
    from dicelab.sweeps.tuning import build_tuner, restore_tuner

    context = SweepContext(
        plan=plan,
        sweep_name=state.name,
        sweep_id=state.sweep_id,
        parent_run_id=state.parent_run_id,
        experiment_id=state.experiment_id,
        tracking_uri=state.tracking_uri,
        metric=metric,
        cpus_per_trial=plan.search.resources.cpu,
    )
    # The sweep's own view replaces Tune's console output (its new output engine prints even at verbose=0).
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
    # The experiment state (what --resume reads) is saved every second and at every checkpoint, so a killed
    # driver loses at most a second of bookkeeping; at this size the snapshots cost nothing worth a warning.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "1")
    os.environ["TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S"] = "0"
    if resume and tune.Tuner.can_restore(directory):
        tuner = restore_tuner(context, inputs, directory, retry_failed)
    else:  # new, or killed before Tune saved anything: start the trials in the same sweep (same runs)
        trial_records = TrialRecords(context, plan.search.scheduler.name)
        race_dir = directory if plan.racing is not None else None
        callbacks = [trial_records, SweepView(context, trial_records, where, race_dir)]
        tuner = build_tuner(context, inputs, directory, callbacks)
    return tuner.fit()


def _mlflow_location(tracking_uri: str, state: SweepState) -> str:
    if tracking_uri.startswith(("http://", "https://")):
        return f"MLflow: {links.run_url(tracking_uri, state.experiment_id, state.parent_run_id)}"
    return f"MLflow: experiment {state.name!r} in {tracking_uri}"
