"""The environment of the processes that run a sweep's trials: glibc's malloc with a single arena.

Tune runs a trial's function in a second thread of its actor, and glibc gives a new thread a malloc arena
of its own. That arena hands memory back to the kernel far more eagerly than the main one, and a training
step allocates and frees the same activation buffers thousands of times, so a trial in a second thread
pays many more minor page faults than in the process's main thread, and runs longer
(`benchmarks/trial_thread.py` measures it; benchmarks/results/trial_thread.md). With `MALLOC_ARENA_MAX=1`
every thread allocates from the main arena.

glibc reads the variable when a process starts, so it is set where Ray starts its workers: in the
environment a private local Ray inherits from the driver, and in the runtime env of a sweep on a cluster.
A value set in the driver's environment wins everywhere, and one that the Ray job sets wins over both.
Other C libraries (musl, or a preloaded jemalloc) ignore it.
"""

from __future__ import annotations

import json
import os

from dicelab.sweeps import ray_adapter

TRIAL_ENV = {"MALLOC_ARENA_MAX": "1"}
# The MLflow client settings of the driver's shell, given to the trials on a cluster (a sweep joining one with
# --address, a job `dicelab submit` starts) so that trials on every node log to the same server with the same
# login. A runtime env is visible to anyone who can read the cluster's dashboard: on a shared cluster set
# them on the nodes instead (see the clusters docs).
MLFLOW_CLIENT_ENV = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
    "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_TRACKING_INSECURE_TLS",
)
JOB_CONFIG_VAR = ray_adapter.JOB_CONFIG_ENV  # Ray's: the config of the Ray job this driver runs in


def _wanted() -> dict[str, str]:
    """TRIAL_ENV, with the values this process's environment sets already."""
    return {key: os.environ.get(key, value) for key, value in TRIAL_ENV.items()}


def prepare_local_ray() -> None:
    """Before `ray.init` starts a local Ray: its processes, and so its workers, inherit this environment."""
    os.environ.update(_wanted())


def env_vars(given: dict[str, str] | None = None) -> dict[str, str]:
    """A runtime env's `env_vars`: the trials' environment under the `given` variables (these win)."""
    return {**_wanted(), **(given or {})}


def mlflow_client_env() -> dict[str, str]:
    """The MLflow client settings (MLFLOW_CLIENT_ENV) this process's environment sets."""
    return {name: os.environ[name] for name in MLFLOW_CLIENT_ENV if os.environ.get(name)}


def missing_in_job(extra: dict[str, str] | None = None) -> dict[str, str]:
    """For a driver joining a cluster: the trials' variables (and `extra` ones) that the Ray job it runs in
    (if any: `dicelab submit` sets them all) does not set. Ray refuses a driver's runtime env that sets a
    variable its job sets too."""
    job = json.loads(os.environ.get(JOB_CONFIG_VAR) or "{}")
    given = (job.get("runtime_env") or {}).get("env_vars") or {}
    wanted = {**_wanted(), **(extra or {})}
    return {key: value for key, value in wanted.items() if key not in given}
