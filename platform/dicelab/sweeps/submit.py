"""`dicelab submit`: run a sweep on a Ray cluster as a Ray Job, with this version of dicelab.

The job's runtime environment carries the working directory (configs, local data; without virtualenvs,
caches and results) and the dicelab package itself (`py_modules`), so the cluster needs dicelab's
dependencies but not dicelab: it runs exactly the code that submitted the job. The job's driver is
`python -m dicelab.cli sweep CONFIG --address auto`, on the head node. The working directory is a temporary
copy that Ray deletes after the job, so unless the config sets `search.storage` the job keeps its Tune
results and checkpoints in `~/.dicelab/ray_results` on the head node (where `--resume` finds them).

Token authentication: Ray's client sends the cluster token when `RAY_AUTH_MODE=token` is set; the token
comes from `RAY_AUTH_TOKEN`, the file named by `RAY_AUTH_TOKEN_PATH`, or `~/.ray/auth_token`.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from dicelab.config import read_config
from dicelab.errors import ConfigError, DicelabError, TrackingError, first_line
from dicelab.experiment import check_experiment
from dicelab.plugins import PLUGINS_TAG, fingerprint, pins, py_modules
from dicelab.sweeps import ray_adapter, trial_env
from dicelab.sweeps.space import check_overrides, outline_sweep
from dicelab.tracking.store import check_tracking as check_server

# Never uploaded with the working directory: environments, VCS, local results and caches.
JOB_STORAGE = "~/.dicelab/ray_results"
EXCLUDES = [
    ".venv",
    "venv",
    ".git",
    ".dicelab",
    "mlruns",
    "mlartifacts",
    "__pycache__",
    "*.egg-info",
    "*.pyc",
]
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
FORWARDED_ENV = trial_env.MLFLOW_CLIENT_ENV  # the MLflow login travels with the job (see trial_env)


class SubmitError(DicelabError):
    """The cluster cannot be reached, refuses the job, or the job cannot be followed."""


@dataclass
class SubmitOptions:
    config: str
    address: str
    overrides: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)  # --plugin entries
    name: str | None = None
    tracking_uri: str | None = None
    follow: bool = False
    resume: bool = False
    working_dir: str = "."
    check_tracking: bool = True  # False: the server is reachable from the cluster only


def entrypoint(config: str, options: SubmitOptions, storage: str | None, modules: Sequence[str] = ()) -> str:
    """`modules`: the plugins' module names; the job has their files (`runtime_env`) on its Python path."""
    words = ["python", "-m", "dicelab.cli", "sweep", config, "--address", "auto"]
    plugins = [f"plugins=[{', '.join(modules)}]"] if modules else []
    for override in [*options.overrides, *plugins, *([f"search.storage={storage}"] if storage else [])]:
        words += ["--set", override]
    if options.resume:
        words.append("--resume")
    if options.name:
        words += ["--name", options.name]
    if options.tracking_uri:
        words += ["--tracking-uri", options.tracking_uri]
    return shlex.join(words)


def runtime_env(working_dir: Path, plugin_paths: Sequence[str] = ()) -> dict[str, Any]:
    import dicelab

    package = Path(dicelab.__file__).resolve().parent
    excludes = list(EXCLUDES)
    if package.is_relative_to(working_dir):  # shipped on its own, below
        excludes.append(f"/{package.relative_to(working_dir).as_posix()}")
    env: dict[str, Any] = {
        "working_dir": str(working_dir),
        "excludes": excludes,
        "py_modules": [str(package), *plugin_paths],  # dicelab, then the user's plugins
    }
    forwarded = trial_env.mlflow_client_env()
    env["env_vars"] = trial_env.env_vars(forwarded)  # the job's driver and every worker of its trials
    return env


def _client(address: str) -> Any:
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except Exception as error:  # ConnectionError, RuntimeError on HTTP 401/403, ValueError on bad addresses
        raise SubmitError(f"--address {address}: {first_line(error)}{_auth_hint(error)}") from None


def _auth_hint(error: BaseException) -> str:
    text = str(error)
    if "401" in text or "403" in text or "uthentication" in text:
        return (
            " (the cluster uses token authentication: export RAY_AUTH_MODE=token and put the cluster's token"
            " in ~/.ray/auth_token or RAY_AUTH_TOKEN)"
        )
    return ""


def submit(options: SubmitOptions, console: Console | None = None) -> int:
    console = console or Console()
    working_dir = Path(options.working_dir).resolve()
    config_path = Path(options.config).resolve()
    if not config_path.is_relative_to(working_dir):
        raise ConfigError(
            f"{options.config}: the config must be inside the working directory {working_dir}, "
            "which is what the job receives"
        )
    # config errors here, not on the cluster: the schema now, the registries (torch, transformers: seconds of
    # imports) once the server has answered, so a server that is down is said at once
    config = read_config(config_path, options.overrides, options.plugins)
    if config.search is None:
        raise ConfigError(f"{options.config}: a sweep config needs a search: section (see docs: sweeps)")
    check_overrides(outline_sweep(config, options.config), options.overrides)
    uri = options.tracking_uri or config.tracking.uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri and uri.startswith(("http://", "https://")):
        # The job's trials reach the server from the cluster; a server this machine cannot reach either is
        # almost always a typo or a server that is down, and the job would fail on the cluster minutes later.
        if options.check_tracking:
            _check_server(uri)
    else:
        console.print(
            "[yellow]warning:[/] no http(s) MLflow server given (--tracking-uri, tracking.uri or "
            "MLFLOW_TRACKING_URI): the job records its runs in a SQLite file on the cluster's head node"
        )
    check_experiment(config, str(config_path))

    client = _client(options.address)
    # the cluster's Ray and Python versions against this machine's, and the token: one line, before the job
    ray_adapter.check_dashboard(client, options.address)
    name = options.name or config.name
    submission_id = f"dicelab-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        job_id = client.submit_job(
            entrypoint=entrypoint(
                config_path.relative_to(working_dir).as_posix(),
                options,
                None if config.search.get("storage") else JOB_STORAGE,
                [pin.module for pin in pins()],
            ),
            runtime_env=runtime_env(working_dir, py_modules(pins())),
            submission_id=submission_id,
            metadata={"dicelab.sweep": name, PLUGINS_TAG: fingerprint()},
        )
    except Exception as error:
        raise SubmitError(
            f"submitting to {options.address}: {first_line(error)}{_auth_hint(error)}"
        ) from None
    console.print(f"submitted job {job_id}", highlight=False)
    if not options.follow:
        console.print(
            f"follow it with: ray job logs --follow {job_id} --address {options.address}", highlight=False
        )
        return 0
    try:
        asyncio.run(_print_logs(client, job_id))
    except KeyboardInterrupt:
        stop = f"ray job stop {job_id} --address {options.address}"
        console.print(f"stopped following; the job keeps running (stop it: {stop})", highlight=False)
        return 130
    status = _final_status(client, job_id)
    console.print(f"job {job_id} {status}", highlight=False)
    return 0 if status == "SUCCEEDED" else 1


def _check_server(uri: str) -> None:
    try:
        check_server(uri)
    except TrackingError as error:
        raise TrackingError(f"{error} (if only the cluster can reach it: --no-tracking-check)") from None


async def _print_logs(client: Any, job_id: str) -> None:
    async for lines in client.tail_job_logs(job_id):
        print(lines, end="", flush=True)


def _final_status(client: Any, job_id: str, timeout_s: float = 60.0) -> str:
    """The job's terminal status (the log stream can close a moment before the status is final)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = str(client.get_job_status(job_id).value)
        if status in TERMINAL or time.monotonic() > deadline:
            return status
        time.sleep(1.0)
