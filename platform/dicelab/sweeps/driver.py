"""`dicelab sweep`: validate the sweep, open its MLflow parent run, start or join Ray, build the inputs once,
run the trials through Ray Tune, and close the parent run with a summary.

Start-up is a critical path of seconds on a small machine, so it is arranged around Ray's start (its
processes take seconds to come up, mostly waiting): only the config's schema and the sweep's outline,
the --resume checks and an MLflow server's health come before it; the registry checks, the trials'
configs, the store and parent run, the inputs and Tune's imports run in a set-up thread meanwhile, and a
local Ray's prestarted workers import the trials' modules (`warm_workers`). This module's own imports stay
light for the same reason (MLflow and Tune are imported by the set-up thread,
after Ray's start began).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dicelab.config import ExperimentConfig, config_to_yaml, read_config
from dicelab.errors import ConfigError, DicelabError, first_line
from dicelab.plugins import PLUGINS_TAG, fingerprint, load_plugins, pins, py_modules
from dicelab.sweeps import local_ray, ray_adapter, trial_env, warm_workers
from dicelab.sweeps.space import SweepPlan, check_overrides, check_trials, outline_sweep
from dicelab.sweeps.state import SweepState
from dicelab.tracking import check_tracking, links, resolve_tracking_uri
from dicelab.tracking import conventions as names
from dicelab.tracking.store import STORE_DIR
from dicelab.words import count

if TYPE_CHECKING:
    from mlflow import MlflowClient

RESULTS_DIR = "ray_results"
_log = logging.getLogger(__name__)


@dataclass
class SweepOptions:
    config: str
    overrides: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)  # --plugin entries (the config's own come with it)
    address: str | None = None  # None: $RAY_ADDRESS, else a new local Ray; "auto"; "HOST:PORT"
    name: str | None = None
    resume: bool = False
    retry_failed: bool = False  # with resume: failed trials run again from their last checkpoint
    tracking_uri: str | None = None
    register: str | None = None  # register the winner's model under this Model Registry name


@dataclass
class SweepOutcome:
    """What a sweep ended with (`dicelab.sweep` returns it; `dicelab sweep` prints it)."""

    exit_code: int  # 0: a trial succeeded; 1: every trial failed; 130: interrupted
    name: str  # the sweep's name and MLflow experiment
    sweep_id: str
    experiment_id: str
    parent_run_id: str
    tracking_uri: str
    metric: str  # the dev metric the sweep ranked by, without prefix
    directory: Path  # Tune's results and checkpoints of this invocation
    interrupted: bool
    race_decision: str | None = None  # the seed race's one-line decision, when the sweep raced
    winner_run_id: str | None = None  # the trial whose model the sweep kept (search.save_model)
    winner_model_uri: str | None = None  # that model's URI (also the parent run's dicelab.winner_model tag)
    warnings: list[str] = field(default_factory=list)  # e.g. why no model was saved
    model_seconds: float = 0.0  # the time saving the sweep's model(s) took, after the trials
    model_reused: bool = False  # the winner's model had been saved before this run (a finished sweep resumed)


# ----------------------------------------------------------------------------------------------------------
# Config


def load_sweep_config(options: SweepOptions) -> tuple[ExperimentConfig, SweepPlan]:
    """The config and its sweep's outline, schema-checked (the registry checks come with `check_trials`)."""
    overrides = list(options.overrides)
    if options.name:
        overrides += [f"name={options.name}", f"tracking.experiment={options.name}"]
    config = read_config(options.config, overrides, options.plugins)
    # before Ray starts: a sweep joining a cluster sends the plugins' files with its runtime env
    load_plugins(config.plugins)
    _absolute_paths(config)  # before the outline: its trials' configs start from this one
    plan = outline_sweep(config, options.config)
    check_overrides(plan, options.overrides)
    return config, plan


def _absolute_paths(config: ExperimentConfig) -> None:
    """Trials run in other directories (Tune's trial dirs, other nodes): relative paths are made absolute."""
    data = config.data
    data.cache_dir = str(Path(data.cache_dir).resolve())
    if data.path is not None:
        data.path = str(Path(data.path).resolve())
    if Path(config.model.backbone).exists():
        config.model.backbone = str(Path(config.model.backbone).resolve())


# ----------------------------------------------------------------------------------------------------------
# Ray


def connect_ray(address: str | None, outline: SweepPlan | None = None) -> None:
    """Join a cluster (`auto`, `HOST:PORT`, or $RAY_ADDRESS), else start a private local Ray that dies with
    this driver (see `local_ray`), whose prestarted workers import the trials' modules when the outlined
    sweep's first trials take all of them (see `warm_workers`; DICELAB_RAY_TUNING=0: a plain local Ray).
    The trials' workers get `trial_env`'s environment: from this process on a local Ray, else through a
    runtime env (a job that `dicelab submit` started has it in the job's own)."""
    import ray

    import dicelab

    quiet = {"logging_level": logging.WARNING, "configure_logging": True}
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        # "local", never None: None would join whatever cluster was started last on this machine.
        # Ray's own default (token authentication) is kept; its warning that it is the default is not news.
        ray_adapter.quiet_token_default_warning()
        # Ray prestarts one worker per CPU twice: when the raylet starts (off here: idle CPU and memory) and
        # when the first driver connects; the trials' actors take the second set (see `warm_workers`).
        system: dict[str, Any] = {}
        if ray_adapter.tuning_on():
            system = ray_adapter.node_settings()
            if outline is not None:
                system.update(warm_workers.system_config(outline, warm_workers.local_cpus()))
        trial_env.prepare_local_ray()
        context = _start_local_ray(system, quiet)
        session_dir = ray_adapter.session_dir(context)
        local_ray.reap_leftovers(session_dir.parent)  # of earlier drivers killed before their watchdog ran
        local_ray.record(session_dir, ray.get_runtime_context().get_node_id())
    else:  # `preflight` checked the cluster first, where this Ray lets it
        # the trials log to the driver's MLflow server with its login, on every node of the cluster
        missing = trial_env.missing_in_job(trial_env.mlflow_client_env())
        runtime_env: dict[str, Any] = {"env_vars": missing} if missing else {}
        shipped: list[Any] = [dicelab] if address != "auto" else []  # this dicelab (the package only)
        shipped += py_modules(pins())  # and the user's plugins: every node imports the driver's version
        job = json.loads(os.environ.get(trial_env.JOB_CONFIG_VAR) or "{}")
        if shipped and "py_modules" not in (job.get("runtime_env") or {}):  # `dicelab submit` sent them
            runtime_env["py_modules"] = shipped
        try:
            ray.init(address=address, runtime_env=runtime_env or None, **quiet)
        except Exception as error:  # Ray's own version check or a refused token: the preflight's one line
            refusal = ray_adapter.init_error(error, address)
            if refusal is None:
                raise
            raise refusal from None


def preflight(address: str | None) -> None:
    """Before joining a cluster (and before anything is logged): its Ray and Python versions against this
    driver's, and its token; a mismatch is one line naming both versions (exit 2). A local Ray needs none."""
    address = address or os.environ.get("RAY_ADDRESS")
    if address and not address.startswith("ray://"):  # Ray Client compares the versions itself
        ray_adapter.check_cluster(address)


# Ray's start fails when its processes come up too slowly for its fixed waits (the driver's 30 s for the
# raylet, the raylet's for its agents' ports), which a loaded machine can exceed: it is tried once more.
LOCAL_RAY_STARTS = 2


class LocalRayError(DicelabError):
    """A private local Ray did not start in time, twice: the machine is too busy for Ray's fixed waits."""

    exit_code = 1  # not the input's fault: the same command can succeed on a quieter machine


def _start_local_ray(system: dict[str, Any], quiet: dict[str, Any]) -> Any:
    """`ray.init` of a private local node (what it returns: the node's addresses and session directory),
    with `system` (Ray's internal settings, `ray_adapter.init_local`) unless this Ray refuses them: then a
    plain start."""
    import ray

    for attempt in range(1, LOCAL_RAY_STARTS + 1):
        try:
            return ray_adapter.init_local(system, **quiet)
        except Exception as error:
            if ray_adapter.refused_settings(error, system):
                ray.shutdown()
                _log.warning(
                    "this Ray refused dicelab's local settings (%s): a plain start", first_line(error)
                )
                return _start_local_ray({}, quiet)
            if "timed out during startup" not in str(error):
                raise
            ray.shutdown()  # the half-started node's processes go before the next start
            if attempt == LOCAL_RAY_STARTS:
                raise LocalRayError(
                    f"local Ray did not start ({LOCAL_RAY_STARTS} tries): {first_line(error)} "
                    "- run it again on a less busy machine, or start Ray first (`ray start --head`) and "
                    "pass --address auto"
                ) from None
    raise AssertionError("unreachable")


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


def _warm_started(plan: SweepPlan, tracking_uri: str, server: bool, lines: list[str]) -> SweepPlan:
    """The plan with `search.start_from`'s configurations first (see `dicelab.sweeps.start_from`)."""
    from mlflow import MlflowClient

    from dicelab.sweeps.start_from import warm_points

    if not server:  # a new SQLite store gets its schema before it is read
        check_tracking(tracking_uri)
    assert plan.search.start_from is not None
    points, line = warm_points(MlflowClient(tracking_uri), plan.search.start_from, plan)
    lines.append(line)
    return plan.with_warm_start(points)


# ----------------------------------------------------------------------------------------------------------
# The sweep


def run_sweep(options: SweepOptions, console: Console | None = None) -> int:
    """Run (or with options.resume continue) a sweep; the exit code: 0 when at least one trial succeeded,
    1 when every trial failed, 130 when interrupted."""
    return execute_sweep(options, console).exit_code


def execute_sweep(options: SweepOptions, console: Console | None = None) -> SweepOutcome:
    """Run (or with options.resume continue) a sweep and return what it ended with. `console`: where the
    sweep's lines and its live table of trials go (default: stdout)."""
    import ray

    view = console  # the trials' table too goes there when a console is given (else Tune's callback's own)
    console = console or Console()
    config, outline = load_sweep_config(options)
    storage = outline.search.storage or str(Path(STORE_DIR) / RESULTS_DIR)
    sweep_root = Path(storage).expanduser().resolve() / config.name
    config_yaml = config_to_yaml(config)
    tracking_uri = resolve_tracking_uri(options.tracking_uri, config)
    server = tracking_uri.startswith(("http://", "https://"))
    if server:  # one /health request: a server that is down is the first thing to say, even on --resume
        check_tracking(tracking_uri)
    resumed = _sweep_to_resume(sweep_root, config_yaml) if options.resume else None
    opened: list[tuple[MlflowClient, SweepState, Path]] = []  # by the set-up, once the parent run exists
    warm_start: list[str] = []  # the warm start's line for the header

    def check() -> SweepPlan:
        """The registry checks (torch and transformers are imported for them), the warm start's points (read
        from MLflow) and every trial's config."""
        from dicelab.experiment import check_experiment

        check_experiment(config, options.config)
        plan = outline
        if plan.search.start_from is not None:
            plan = _warm_started(plan, tracking_uri, server, warm_start)
        check_trials(plan)
        return plan

    def set_up(plan: SweepPlan) -> list[tuple[str, ExperimentConfig, Any]]:
        """Everything but Ray before the trials: the store, the parent run, the inputs, Tune's imports."""
        from mlflow import MlflowClient

        from dicelab.sweeps.parent_run import start_or_resume

        if not server:  # a SQLite store's schema is created or migrated here, while Ray starts
            check_tracking(tracking_uri)
        client = MlflowClient(tracking_uri)
        state, directory = start_or_resume(
            client, config, plan, sweep_root, config_yaml, tracking_uri, resumed
        )
        opened.append((client, state, directory))
        if pins():  # which plugin versions the sweep's trials import (each trial run has the tag too)
            client.set_tag(state.parent_run_id, PLUGINS_TAG, fingerprint())
        _print_header(console, options, config, plan, _mlflow_location(tracking_uri, state))
        for line in warm_start:
            console.print(line, highlight=False, soft_wrap=True)
        built = build_inputs(plan, console)
        import dicelab.sweeps.tuning  # torch, transformers, Tune: for _fit, while Ray starts

        if plan.search.save_model != "none":  # saving the winner comes after the trials: its imports now
            import mlflow.pyfunc  # noqa: F401

            import dicelab.models.publishing  # noqa: F401

        return built

    preflight(options.address)
    try:
        # Ray's start overlaps the checks and the set-up (a new store's schema, imports, tokenization). A
        # config error found by the checks is raised once Ray is up (then shut down); no parent run is opened.
        with ThreadPoolExecutor(1, thread_name_prefix="dicelab-set-up") as pool:
            checking = pool.submit(check)
            setting_up = pool.submit(lambda: set_up(checking.result()))
            connect_ray(options.address, outline)
            plan = checking.result()
            built = setting_up.result()
        client, state, directory = opened[0]
        where = _mlflow_location(tracking_uri, state)
        inputs, prepared = share_inputs(built, console)
        metric = resolve_metric(plan, prepared)
        from dicelab.sweeps.callbacks import printing_to

        with printing_to(view) if view is not None else contextlib.nullcontext():
            grid = _fit(plan, state, metric, inputs, directory, where, options.resume, options.retry_failed)
    except BaseException as error:
        if opened:  # the parent run exists: it ends with the sweep
            from dicelab.sweeps.parent_run import end_parent_run, end_running_trials

            client, state, _ = opened[0]
            with contextlib.suppress(Exception):  # a clean-up: the error being raised is the one to report
                why = f"the sweep's driver stopped ({type(error).__name__})"
                end_running_trials(client, state, options.config, why)
            end_parent_run(client, state, error)
        raise
    finally:
        if ray.is_initialized():
            ray.shutdown()
        local_ray.release()
    built_inputs = {key: inputs for key, _, inputs in built}
    return _close(options, console, client, plan, state, directory, grid, metric, tracking_uri, built_inputs)


def _close(
    options: SweepOptions,
    console: Console,
    client: MlflowClient,
    plan: SweepPlan,
    state: SweepState,
    directory: Path,
    grid: Any,
    metric: str,
    tracking_uri: str,
    built_inputs: dict[str, Any],
) -> SweepOutcome:
    """After Tune: the race's record, the parent run's summary, the trials' run names, the winner's model,
    the closing lines."""
    from dicelab.sweeps import records
    from dicelab.sweeps.parent_run import (
        close_parent_run,
        end_running_trials,
        label_trial_runs,
        model_line,
        print_closing,
    )
    from dicelab.sweeps.race_records import log_race, read_race

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
        end_running_trials(client, state, options.config, "the sweep was interrupted")
        runs = records.trial_runs(client, state.experiment_id, state.sweep_id)
    if race is not None:
        log_race(client, state.parent_run_id, race, runs)
    outcomes = close_parent_run(client, state, runs, metric, interrupted)

    label_trial_runs(client, runs, metric)
    decided = race["decision"]["summary"] if race is not None and race.get("decision") else None
    succeeded = outcomes[names.COMPLETED] + outcomes[names.EARLY_STOPPED]
    outcome = SweepOutcome(
        exit_code=130 if interrupted else 0 if succeeded else 1,
        name=state.name,
        sweep_id=state.sweep_id,
        experiment_id=state.experiment_id,
        parent_run_id=state.parent_run_id,
        tracking_uri=tracking_uri,
        metric=metric,
        directory=directory,
        interrupted=interrupted,
        race_decision=decided,
    )
    if succeeded and not interrupted and plan.search.save_model != "none":
        from dicelab.sweeps.winner_model import SweepRuns, keep_models

        where = SweepRuns(tracking_uri, state.experiment_id, state.sweep_id, state.parent_run_id, metric)
        kept = keep_models(client, plan, where, grid, built_inputs, options.register)
        outcome.winner_run_id, outcome.winner_model_uri = kept.winner_run_id, kept.winner_model_uri
        outcome.warnings += kept.warnings
        outcome.model_seconds = kept.seconds
        outcome.model_reused = kept.reused
    print_closing(console, state, runs, outcomes, metric, tracking_uri)
    if decided is not None:
        console.print(f"race:   {decided}", highlight=False, soft_wrap=True)
    if outcome.winner_model_uri is not None:
        saved = model_line(
            runs, outcome.winner_run_id, outcome.winner_model_uri, outcome.model_seconds, outcome.model_reused
        )
        console.print(saved, highlight=False, soft_wrap=True)
    for warning in outcome.warnings:
        console.print(f"warning: {warning}", highlight=False, soft_wrap=True)
    if interrupted:
        console.print(
            f"interrupted: continue with  dicelab sweep {options.config} --resume  ({directory})",
            highlight=False,
            soft_wrap=True,
        )
    return outcome


def _print_header(
    console: Console, options: SweepOptions, config: ExperimentConfig, plan: SweepPlan, where: str
) -> None:
    import dicelab

    seeds = f" x {count(len(plan.seeds), 'seed')}" if plan.seeds else ""
    configurations = count(plan.num_configurations, "configuration")
    trials = f"{count(plan.num_trials, 'trial')} ({configurations}{seeds})"
    if plan.racing is not None:
        racing = plan.racing
        trials = (
            f"seed race of {configurations} ({racing.min_seeds} to "
            f"{racing.max_seeds} seeds each, at most {plan.num_trials} trials, {racing.test} test at "
            f"{racing.confidence:g})"
        )
    if plan.search.time_budget_s is not None:
        trials += f" within {plan.search.time_budget_s:g} s"
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


def _sweep_to_resume(sweep_root: Path, config_yaml: str) -> tuple[SweepState, Path]:
    """--resume: the newest sweep under sweep_root, which must have been started with the same config."""
    state, directory = SweepState.latest(sweep_root)
    state.check_same_config(directory, config_yaml)
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
    from dicelab.sweeps.tune_storage import drop_truncated_errors
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
        plugins=pins(),
    )
    ray_adapter.quiet_tune_driver()  # the sweep's own view, Tune's state saves, JSON logs only
    if ray_adapter.tuning_on():
        ray_adapter.bare_trial_actors()  # the trials can take the prestarted workers (`warm_workers`)
    if resume and tune.Tuner.can_restore(directory):
        tuner = restore_tuner(context, inputs, directory, retry_failed)
    else:  # new, or killed before Tune saved anything: start the trials in the same sweep (same runs)
        trial_records = TrialRecords(context, plan.search.scheduler.name)
        race_dir = directory if plan.racing is not None else None
        callbacks = [trial_records, SweepView(context, trial_records, where, race_dir)]
        tuner = build_tuner(context, inputs, directory, callbacks)
    try:
        return tuner.fit()
    except (pickle.UnpicklingError, EOFError):
        # After the trials: Tune collects the results, reading each failed trial's pickled error, and one
        # cut short by a full disk fails that. Drop it (its text trace stays) and collect them again.
        if not drop_truncated_errors(directory):
            raise
        return tuner.get_results()


def _mlflow_location(tracking_uri: str, state: SweepState) -> str:
    if tracking_uri.startswith(("http://", "https://")):
        return f"MLflow: {links.run_url(tracking_uri, state.experiment_id, state.parent_run_id)}"
    return f"MLflow: experiment {state.name!r} in {tracking_uri}"
