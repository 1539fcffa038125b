"""Every private Ray / Tune touch point of dicelab, in one module, each with the reason it is needed.

Ray is pinned exactly (pyproject, docs/clusters.md) because these are not Ray's public API: a Ray release may
rename or remove any of them. `tests/sweeps/test_ray_adapter.py` has a contract test per touch point, which
fails with a message naming it when Ray changes it, and a test that no other dicelab module imports
`ray._private`, `ray._raylet`, `ray._common` or `ray.train._internal`, or patches Ray. To check a new Ray
release: `nox -s next_ray` (see docs/clusters.md).

The preflight (`check_cluster`, `check_dashboard`) runs before a driver joins a cluster and before
`dicelab submit` sends a job: a cluster whose Ray or Python version differs from the driver's, or that refuses
the driver's token, is one line naming both versions (or the token), exit 2, before anything is logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
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


def node_system_config() -> dict[str, Any]:
    """`_system_config` of a private local node (internal keys, validated by Ray at start): no workers
    prestarted with the raylet (idle CPU and memory: the trials' actors take the set prestarted when the
    driver connects), and no metrics collected (nothing reads them without a dashboard; a third of the
    dashboard agent's CPU)."""
    return {"enable_worker_prestart": False, "enable_metrics_collection": False}


def preload_system_config(modules: list[str]) -> dict[str, Any]:
    """`_system_config` that makes the prestarted workers import `modules` at once, with Ray's idle-worker
    killer off (it killed them in the moment before Tune's actors claimed them; see `warm_workers`)."""
    return {"preload_python_modules": modules, "kill_idle_workers_interval_ms": 0}


def session_dir() -> Path:
    """The session directory of the Ray node this driver started (no public API names it): `local_ray`
    records its driver there."""
    import ray

    return Path(ray._private.worker._global_node.get_session_dir_path())


def local_cpus() -> int:
    """The CPUs Ray counts for a node it starts, cgroup limits included (os.cpu_count ignores them): one
    prestarted worker each."""
    from ray._private.utils import get_num_cpus

    return int(get_num_cpus())


def quiet_token_default_warning() -> None:
    """Ray warns at every local start that token authentication is its default: not news to a sweep."""
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)


# ----------------------------------------------------------------------------------------------------------
# Tune


def bare_trial_actors() -> None:
    """Tune gives every trial actor a runtime env (PL_DISABLE_FORK=1, a PyTorch Lightning switch), so no trial
    could take a prestarted worker (whose env is empty): the variable is dropped from Tune's defaults."""
    from ray.tune.execution import class_cache

    class_cache.DEFAULT_ENV_VARS.pop("PL_DISABLE_FORK", None)


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
    takes long; Tune's JSON logger only (`tuning.build_tuner` adds it)."""
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "1")
    os.environ["TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S"] = "0"
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"


def quiet_checkpoint_logs() -> None:
    """One INFO line per checkpoint from Ray Train's storage, forwarded to the driver's terminal, would bury
    the sweep's own view."""
    logging.getLogger("ray.train._internal.storage").setLevel(logging.WARNING)


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


def forget_checkpoint(trial: Any) -> None:
    """Give an unfinished trial a new, empty checkpoint manager (Tune has no public way to drop a trial's
    checkpoint): the trial then starts over instead of failing on a checkpoint that is gone."""
    from ray.train._internal.checkpoint_manager import _CheckpointManager

    manager = trial.run_metadata.checkpoint_manager
    trial.run_metadata.checkpoint_manager = _CheckpointManager(manager.checkpoint_config)


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
    (Ray exactly; Python as Ray compares it), else None."""
    level = _python_level()
    same_python = cluster.python.split(".")[:level] == driver.python.split(".")[:level]
    if cluster.ray == driver.ray and same_python:
        return None
    return (
        f"{where}: the cluster runs {cluster}, this driver {driver}: run the driver with the cluster's "
        "versions (its image, or `pip install ray[default,tune]==<version>` on that Python)"
    )


def _token_hint(error: BaseException) -> str | None:
    text = str(error)
    if "uthenticat" in text or "401" in text or "403" in text or "token" in text.lower():
        return (
            "the cluster refused this driver's Ray token (token authentication: export RAY_AUTH_MODE=token "
            "and put the cluster's token in ~/.ray/auth_token, RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH)"
        )
    return None


def gcs_address(address: str) -> str:
    """The GCS address `ray.init(address=...)` joins ("auto": the cluster started last on this machine)."""
    from ray._private.services import canonicalize_bootstrap_address_or_die

    return canonicalize_bootstrap_address_or_die(address)


def cluster_versions(address: str, timeout_s: float = 30.0) -> Versions:
    """The Ray and Python versions a cluster's head recorded (Ray's cluster metadata, in its GCS), read with
    the driver's token. Raises ClusterMismatch when the cluster refuses the token, DicelabError when it
    cannot be reached."""
    from ray._common.usage.usage_constants import CLUSTER_METADATA_KEY
    from ray._private.ray_constants import KV_NAMESPACE_CLUSTER
    from ray._raylet import GcsClient

    where = f"--address {address}"
    try:
        with _quiet_stderr():  # Ray's C++ client logs a refused token itself: the one line below says it
            client = GcsClient(address=gcs_address(address))
            raw = client.internal_kv_get(
                CLUSTER_METADATA_KEY, namespace=KV_NAMESPACE_CLUSTER, timeout=timeout_s
            )
    except (Exception, SystemExit) as error:  # canonicalize_bootstrap_address_or_die exits when none runs
        hint = _token_hint(error)
        if hint is not None:
            raise ClusterMismatch(f"{where}: {hint}") from None
        raise DicelabError(f"{where}: no Ray cluster answers there ({_one_line(error)})") from None
    return _versions_of(_json(raw), where)


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
    """Before `ray.init(address=...)`: the cluster's versions against this driver's, and its token."""
    cluster = cluster_versions(address)
    line = version_mismatch(cluster, driver_versions(), f"--address {address}")
    if line is not None:
        raise ClusterMismatch(line)


def dashboard_versions(client: Any, address: str) -> Versions:
    """The cluster's versions through its dashboard (what `dicelab submit` talks to), from a
    JobSubmissionClient: Ray's cluster metadata endpoint, read with the client's token headers."""
    where = f"--address {address}"
    try:
        response = client._do_request("GET", "/api/v0/cluster_metadata")
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
    line = version_mismatch(dashboard_versions(client, address), driver_versions(), f"--address {address}")
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
