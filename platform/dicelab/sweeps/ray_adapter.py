"""What dicelab needs from Ray and Tune beyond their plain calls, in one module, each with its reason.

dicelab supports a range of Ray releases (pyproject.toml; `nox -s oldest newest` tests both ends), so it uses
Ray's public APIs and documented environment variables. These touch points have no public API and stay
here, each trying the private path and falling back to plain behaviour when a Ray release lacks it (a test
runs each both ways, tests/sweeps/test_ray_adapter.py):
- `cluster_versions`: the versions a cluster's head recorded, read from its GCS before the driver joins;
  without it, `ray.init`'s own version check says the same (`init_error`), only after the sweep started.
- `dashboard_versions`: the same through the dashboard for `dicelab submit`; without it the job is sent
  unchecked (its driver, on the cluster, runs the cluster's Ray).
- `quiet_token_default_warning`: the logger of Ray's warning that token authentication is its default;
  without it, the warning shows.
- The tuning of a private local Ray (`node_settings`, `preload_settings`, `bare_trial_actors`,
  `local_cpus`): Ray's internal settings and Tune's actor defaults, kept because the quickstart sweep
  took far less wall time with them (benchmarks/results/ray_speedups_ab.md); `DICELAB_RAY_TUNING=0` turns
  them off, and a Ray that refuses the settings, or a Tune without those defaults, gets Ray's plain start.
`forget_checkpoint` rebuilds a Tune trial's checkpoint manager through the object's own class, falling back
to leaving the checkpoint (the trial then fails on it, recorded). No other dicelab module touches Ray's
internals (the test checks).

The preflight (`check_cluster`, `check_dashboard`) runs before a driver joins a cluster and before
`dicelab submit` sends a job: a cluster whose Ray or Python version differs from the driver's, or that refuses
the driver's token, is one line naming both versions (or the token) and how to install the cluster's Ray
beside dicelab, exit 2, before anything is logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from dicelab.errors import DicelabError
from dicelab.training.reporter import TrialStopped

# ----------------------------------------------------------------------------------------------------------
# Names Ray uses inside its processes and on disk

# Set by the raylet in the environment of every process it starts: `local_ray` finds a dead driver's node's
# processes by it (no process is ever found by name).
NODE_ID_ENV = "RAY_NODE_ID"
# Ray's session directories under its temp dir: `local_ray` looks there for records of dead drivers.
SESSION_GLOB = "session_*"
# The config (runtime env included) of the Ray job a driver runs in: a driver joining a cluster from inside a
# `dicelab submit` job must not set again a variable its job's runtime env sets (Ray refuses it).
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
# Tune's pickled error of a trial, in the trial's directory: one cut short by a full disk breaks a resume.
TRIAL_ERROR_PICKLE = "error.pkl"
# Tune's experiment-level state (experiment_state-*.json, searcher state, tuner.pkl): files of these suffixes
# directly in the experiment's directory; the trials' own directories are below it.
EXPERIMENT_STATE_SUFFIXES = (".json", ".pkl")


def trial_error_pickles(directory: Path) -> list[Path]:
    """Tune's pickled trial errors under an experiment directory (one directory per trial)."""
    return sorted(directory.glob(f"*/{TRIAL_ERROR_PICKLE}"))


# ----------------------------------------------------------------------------------------------------------
# A private local Ray


# Ray warns at every local start that token authentication is its default: not news to a sweep. No public
# switch quiets it (RAY_AUTH_MODE set in this process comes too late: Ray reads it when it is imported).
TOKEN_SETUP_LOGGER = "ray._private.authentication.authentication_token_setup"


def quiet_token_default_warning() -> bool:
    """Quiet that warning's logger where this Ray has it (True); elsewhere Ray's line shows (False)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(TOKEN_SETUP_LOGGER) is not None
    except ImportError:  # a parent package gone
        found = False
    if found:
        logging.getLogger(TOKEN_SETUP_LOGGER).setLevel(logging.ERROR)
    return found


# dicelab's tuning of its private local Ray and of its trial workers (`warm_workers`, `dicelab.garbage`):
# kept for the quickstart sweep's wall time (benchmarks/results/ray_speedups_ab.md); "0" turns it all off.
TUNING_ENV = "DICELAB_RAY_TUNING"


def tuning_on() -> bool:
    """Whether dicelab tunes its private local Ray and its trial workers (DICELAB_RAY_TUNING, on unless 0)."""
    return os.environ.get(TUNING_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def node_settings() -> dict[str, Any]:
    """`_system_config` of a private local node (internal keys, checked by Ray at start; a Ray that refuses
    them gets a plain start, `driver._start_local_ray`): no workers prestarted with the raylet (idle CPU and
    memory: the trials' actors take the set prestarted when the driver connects), and no metrics collected
    (nothing reads them without a dashboard; a third of the dashboard agent's CPU)."""
    return {"enable_worker_prestart": False, "enable_metrics_collection": False}


def preload_settings(modules: list[str]) -> dict[str, Any]:
    """`_system_config` that makes the prestarted workers import `modules` at once, with Ray's idle-worker
    killer off (it killed them in the moment before Tune's actors claimed them; see `warm_workers`)."""
    return {"preload_python_modules": modules, "kill_idle_workers_interval_ms": 0}


def refused_settings(error: BaseException, system: dict[str, Any]) -> bool:
    """Whether `ray.init` failed on one of the `_system_config` keys (a Ray release that renamed them)."""
    text = str(error)
    return bool(system) and ("system_config" in text or any(key in text for key in system))


def init_local(settings: dict[str, Any], **options: Any) -> Any:
    """`ray.init` of a private local node without a dashboard, with `settings` as Ray's `_system_config`
    (a copy: Ray adds its spilling config to the dict it is given, which a second try would pass on)."""
    import ray

    return ray.init(address="local", include_dashboard=False, _system_config=dict(settings), **options)


def local_cpus() -> int:
    """The CPUs Ray counts for a node it starts, cgroup limits included (os.cpu_count ignores them): one
    prestarted worker each. Ray's own count where this Ray has it, else the CPUs this process may use."""
    try:
        from ray._private.utils import get_num_cpus

        return int(get_num_cpus())
    except (ImportError, AttributeError):
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def bare_trial_actors() -> bool:
    """Tune gives every trial actor a runtime env (PL_DISABLE_FORK=1, a PyTorch Lightning switch), so no trial
    could take a prestarted worker (whose env is empty): the variable is dropped from Tune's defaults. False
    where this Tune has no such defaults (its actors then start as Tune makes them)."""
    try:
        from ray.tune.execution import class_cache

        defaults = class_cache.DEFAULT_ENV_VARS
    except (ImportError, AttributeError):
        return False
    defaults.pop("PL_DISABLE_FORK", None)
    return True


def session_dir(context: Any) -> Path:
    """The session directory of the Ray node this driver started, from what `ray.init` returned (its
    `address_info`): `local_ray` records its driver there."""
    return Path(context.address_info["session_dir"])


# ----------------------------------------------------------------------------------------------------------
# Tune


# Read by a trial actor when Tune hands it the next trial (FunctionTrainable.reset_config): how long to wait
# for the last trial's thread to end.
TRIAL_THREAD_WAIT_ENV = "TUNE_FUNCTION_THREAD_TIMEOUT_S"
TRIAL_THREAD_WAIT_S = 30


def wait_for_stopped_trial_threads() -> None:
    """In a trial's worker: Tune reuses it for the next trial once the last trial's thread has ended, and
    waits 2 s for that by default; a thread still alive then makes Tune drop the worker and start a new one,
    which imports torch, transformers, Tune and MLflow again (about 15 CPU-seconds). A trial that the
    scheduler stopped (ASHA) still records its run's end to MLflow in that thread, which on a loaded machine
    takes longer than 2 s: the worker waits up to 30 s instead (ending as soon as the thread does), unless
    its environment sets the variable."""
    os.environ.setdefault(TRIAL_THREAD_WAIT_ENV, str(TRIAL_THREAD_WAIT_S))


def quiet_tune_driver() -> None:
    """Tune's environment switches, read by its driver: the sweep's own view instead of Tune's console output
    (its new output engine prints even at verbose=0); the experiment state (what --resume reads) saved every
    second unless `tuning.build_tuner` set a longer period for a large sweep, without the warning that saving
    takes long; none of Tune's loggers (`tuning.build_tuner` adds dicelab's `ResultLog`)."""
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "1")
    os.environ["TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S"] = "0"
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"


def quiet_checkpoint_logs() -> None:
    """One INFO line per checkpoint from Ray Train's storage (a module of the `ray.train` package's logger
    tree), forwarded to the driver's terminal, would bury the sweep's own view."""
    logging.getLogger("ray.train").setLevel(logging.WARNING)


def report(metrics: dict[str, Any], checkpoint_directory: str | None = None, *, where: str = "") -> None:
    """`tune.report`. Tune stops a trial (ASHA) by raising SystemExit inside its report: that becomes the
    trial loop's `TrialStopped` ("stopped by Tune's scheduler" + where), so that the trial ends as
    scheduler_stopped (`end_stopped_trial` then ends its thread)."""
    from ray import tune

    checkpoint = tune.Checkpoint.from_directory(checkpoint_directory) if checkpoint_directory else None
    try:
        tune.report(metrics, checkpoint=checkpoint)
    except SystemExit:
        raise TrialStopped(f"stopped by Tune's scheduler{where}") from None


def end_stopped_trial() -> NoReturn:
    """End a stopped trial's function as Tune's own report does: SystemExit with code 0, which Tune's runner
    thread takes as a clean end (Tune reuses the worker for the next trial only once the thread ended)."""
    raise SystemExit(0)


def forget_checkpoint(trial: Any) -> bool:
    """Give an unfinished trial a new, empty checkpoint manager, so that it starts over instead of failing
    on a checkpoint that is gone. Tune has no public way to drop a trial's checkpoint: the manager is built
    again through its own class (no private import). Where a Tune release changed it, the trial keeps the
    lost checkpoint (it then fails on it, and the failure is recorded): False, and a warning."""
    try:
        manager = trial.run_metadata.checkpoint_manager
        trial.run_metadata.checkpoint_manager = type(manager)(manager.checkpoint_config)
    except (AttributeError, TypeError) as error:
        logging.getLogger(__name__).warning(
            "trial %s: its lost checkpoint cannot be dropped in this Ray release (%s): it will fail on it",
            getattr(trial, "trial_id", "?"),
            _one_line(error),
        )
        return False
    return True


# ----------------------------------------------------------------------------------------------------------
# Preflight: the cluster's versions and the token, before joining a cluster or submitting a job


@dataclass(frozen=True)
class Versions:
    ray: str
    python: str

    def __str__(self) -> str:
        return f"Ray {self.ray} on Python {self.python}"


class ClusterMismatch(DicelabError):
    """The cluster runs another Ray or Python version than this driver, or refuses its token."""


def driver_versions() -> Versions:
    import ray

    return Versions(ray.__version__, platform.python_version())


def _python_level() -> int:
    # Ray's own rule (RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL): Python must match to the patch level by default
    return 2 if os.environ.get("RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL", "patch") == "minor" else 3


def version_mismatch(cluster: Versions, driver: Versions, where: str) -> str | None:
    """One line naming both versions when the cluster's Ray or Python version differs from the driver's
    (Ray exactly; Python as Ray compares it), and what to install beside dicelab; else None."""
    level = _python_level()
    same_python = cluster.python.split(".")[:level] == driver.python.split(".")[:level]
    if cluster.ray == driver.ray and same_python:
        return None
    fix = f'pip install "ray[default,tune]=={cluster.ray}"'
    if not same_python:
        fix += f" in a Python {cluster.python} environment"
    supported = supported_ray()
    if supported is not None and not supported.contains(cluster.ray, prereleases=True):
        fix += f" (dicelab supports Ray {supported}: the cluster's is outside it)"
    return (
        f"{where}: the cluster runs {cluster}, this driver {driver}: "
        f"install the cluster's Ray beside dicelab: {fix}"
    )


def supported_ray() -> Any:
    """The Ray releases dicelab supports (a packaging SpecifierSet, from its installed metadata); None for
    dicelab's source on a path, not installed."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        requirements = [Requirement(line) for line in metadata.requires("dicelab") or []]
    except metadata.PackageNotFoundError:
        return None
    return next((req.specifier for req in requirements if req.name == "ray"), None)


def _token_hint(error: BaseException) -> str | None:
    text = str(error)
    if "uthenticat" in text or "401" in text or "403" in text or "token" in text.lower():
        return (
            "the cluster refused this driver's Ray token (token authentication: export RAY_AUTH_MODE=token "
            "and put the cluster's token in ~/.ray/auth_token, RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH)"
        )
    return None


def cluster_versions(address: str, timeout_s: float = 30.0) -> Versions | None:
    """The Ray and Python versions a cluster's head recorded (Ray's cluster metadata, in its GCS), read with
    the driver's token; None where this Ray release lacks the private names this needs (`ray.init` then
    checks the versions itself: `init_error`). Raises ClusterMismatch when the cluster refuses the token,
    DicelabError when it cannot be reached."""
    try:
        from ray._common.usage.usage_constants import CLUSTER_METADATA_KEY
        from ray._private.ray_constants import KV_NAMESPACE_CLUSTER
        from ray._private.services import canonicalize_bootstrap_address_or_die
        from ray._raylet import GcsClient
    except ImportError:
        return None
    where = f"--address {address}"
    try:
        with _quiet_stderr():  # Ray's C++ client logs a refused token itself: the one line below says it
            client = GcsClient(address=canonicalize_bootstrap_address_or_die(address))
            raw = client.internal_kv_get(
                CLUSTER_METADATA_KEY, namespace=KV_NAMESPACE_CLUSTER, timeout=timeout_s
            )
    except (Exception, SystemExit) as error:  # canonicalize_bootstrap_address_or_die exits when none runs
        hint = _token_hint(error)
        if hint is not None:
            raise ClusterMismatch(f"{where}: {hint}") from None
        raise DicelabError(f"{where}: no Ray cluster answers there ({_one_line(error)})") from None
    return _versions_of(_json(raw), where)


# Ray's own error when a driver of other versions joins (`ray.init`): "Version mismatch: The cluster was
# started with:\n    Ray: X\n    Python: Y\nThis process on ... was started with:\n    Ray: A\n    Python: B"
_INIT_MISMATCH = re.compile(r"Ray: (\S+)\s+Python: (\S+).*?Ray: (\S+)\s+Python: (\S+)", re.DOTALL)


def init_error(error: BaseException, address: str) -> DicelabError | None:
    """`ray.init(address=...)`'s refusal as the preflight's one line (a version mismatch, or a refused
    token), for a driver whose preflight could not read the versions; None for any other error."""
    where = f"--address {address}"
    text = str(error)
    found = _INIT_MISMATCH.search(text) if "Version mismatch" in text else None
    if found is not None:
        cluster, driver = Versions(*found.group(1, 2)), Versions(*found.group(3, 4))
        return ClusterMismatch(version_mismatch(cluster, driver, where) or f"{where}: {_one_line(error)}")
    hint = _token_hint(error)
    return ClusterMismatch(f"{where}: {hint}") if hint is not None else None


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null meanwhile (C++ logging bypasses sys.stderr); the driver's other
    threads have not started yet when the preflight runs."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def check_cluster(address: str) -> None:
    """Before `ray.init(address=...)`: the cluster's versions against this driver's, and its token (where
    this Ray release lets the driver read them; else `ray.init` checks, see `init_error`)."""
    cluster = cluster_versions(address)
    line = None if cluster is None else version_mismatch(cluster, driver_versions(), f"--address {address}")
    if line is not None:
        raise ClusterMismatch(line)


CLUSTER_METADATA_PATH = "/api/v0/cluster_metadata"  # the dashboard's REST endpoint of the cluster's versions


def dashboard_versions(client: Any, address: str) -> Versions | None:
    """The cluster's versions through its dashboard (what `dicelab submit` talks to), from a
    JobSubmissionClient: the dashboard's cluster metadata endpoint, read through the client's own request
    method (it carries the client's token headers and turns a refused token into an error). None where a
    Ray release's client lacks that method: the job is then sent unchecked."""
    request = getattr(client, "_do_request", None)
    if request is None:
        return None
    where = f"--address {address}"
    try:
        response = request("GET", CLUSTER_METADATA_PATH)
    except Exception as error:
        hint = _token_hint(error)
        raise ClusterMismatch(f"{where}: {hint or _one_line(error)}") from None
    if response.status_code in (401, 403):
        raise ClusterMismatch(f"{where}: {_token_hint(RuntimeError('401'))}")
    if response.status_code != 200:
        raise DicelabError(f"{where}: the dashboard answered HTTP {response.status_code} for its versions")
    return _versions_of(response.json().get("data") or {}, where)


def check_dashboard(client: Any, address: str) -> None:
    """Before `dicelab submit` sends a job: the cluster's versions against this machine's (the job runs the
    dicelab this machine ships, which was checked against this machine's Ray and Python)."""
    cluster = dashboard_versions(client, address)
    if cluster is None:
        logging.getLogger(__name__).warning(
            "%s: this Ray's job client cannot read the cluster's versions: the job is sent unchecked", address
        )
        return
    line = version_mismatch(cluster, driver_versions(), f"--address {address}")
    if line is not None:
        raise ClusterMismatch(line)


def _versions_of(metadata: dict[str, Any], where: str) -> Versions:
    """From the GCS's metadata (snake_case keys) or the dashboard's answer (the same, camelCased)."""
    ray_version = metadata.get("ray_version", metadata.get("rayVersion"))
    python_version = metadata.get("python_version", metadata.get("pythonVersion"))
    if ray_version is None or python_version is None:
        raise DicelabError(f"{where}: the cluster does not say its Ray and Python versions")
    return Versions(str(ray_version), str(python_version))


def _json(raw: bytes | None) -> dict[str, Any]:
    import json

    return json.loads(raw.decode()) if raw else {}


def _one_line(error: BaseException) -> str:
    from dicelab.errors import first_line

    return first_line(error, with_type=True)
