"""The Ray adapter's contract: one test per Ray / Tune touch point of `dicelab.sweeps.ray_adapter`, each
failing with a message naming the touch point when a Ray release changes it; each private path run both
ways (as it is, and with the private name taken away: the fallback); that no other module touches Ray's
internals; and the preflight's comparison and its one-line error. (Against a real cluster:
tests/integration/test_sweep_cluster.py.) No Ray is started here."""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import mmap
import os
from pathlib import Path

import pytest
import ray

from dicelab.errors import DicelabError
from dicelab.sweeps import ray_adapter
from dicelab.sweeps.ray_adapter import ClusterMismatch, Versions

RAY = Path(ray.__file__).parent
ROOT = Path(__file__).parents[2]


def contract(touch_point: str, holds: bool, detail: str = "") -> None:
    """Fail naming the touch point: the message says what to look at in the new Ray."""
    assert holds, f"Ray changed a touch point of dicelab.sweeps.ray_adapter: {touch_point}. {detail}".strip()


@functools.cache
def _binary_has(binary: Path, word: str) -> bool:
    with binary.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(b"\0" + word.encode() + b"\0") != -1


@functools.cache
def _ray_python_source(*packages: str) -> str:
    return "\n".join(
        path.read_text(errors="replace") for package in packages for path in (RAY / package).rglob("*.py")
    )


# -- a private local Ray ------------------------------------------------------------------------------------


def test_the_token_default_warning_is_quieted_where_its_logger_exists(monkeypatch):
    import logging

    name = ray_adapter.TOKEN_SETUP_LOGGER
    logger = logging.getLogger(name)
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    spec = importlib.util.find_spec(name)
    warning = "Token authentication is enabled for this Ray cluster"
    # Ray releases that warn (2.60) do it from that module; older ones (2.55) neither warn nor need it
    contract(
        f"the {name} logger (quiet_token_default_warning)",
        warning not in _ray_python_source("_private")
        or (spec is not None and warning in Path(spec.origin or "").read_text()),
    )
    assert ray_adapter.quiet_token_default_warning() is True and logger.level == logging.ERROR

    # a Ray without that module: nothing is set, Ray's warning shows
    logger.setLevel(logging.NOTSET)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == name else real(n, *a))
    assert ray_adapter.quiet_token_default_warning() is False and logger.level == logging.NOTSET


@pytest.mark.parametrize("key", [*ray_adapter.node_settings(), *ray_adapter.preload_settings(["m"])])
def test_system_config_keys_are_known_to_ray(key):
    # Ray validates _system_config at start against the RAY_CONFIG entries compiled into _raylet
    contract(
        f"_system_config key {key!r} (node_settings / preload_settings)",
        _binary_has(RAY / "_raylet.so", key),
        "The key is no longer in Ray's compiled config: a local sweep falls back to a plain start.",
    )


@pytest.mark.parametrize(("value", "on"), [(None, True), ("1", True), ("0", False), ("off", False)])
def test_the_tuning_switch(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv(ray_adapter.TUNING_ENV, raising=False)
    else:
        monkeypatch.setenv(ray_adapter.TUNING_ENV, value)
    assert ray_adapter.tuning_on() is on


def test_a_refusal_of_the_system_config_is_told_apart_from_other_errors():
    system = ray_adapter.node_settings()
    assert ray_adapter.refused_settings(ValueError("unknown key enable_worker_prestart"), system)
    assert ray_adapter.refused_settings(RuntimeError("invalid _system_config"), system)
    assert not ray_adapter.refused_settings(RuntimeError("timed out during startup"), system)
    assert not ray_adapter.refused_settings(ValueError("invalid _system_config"), {})


def test_local_cpus_counts_cgroup_limits_and_falls_back_to_the_affinity(monkeypatch):
    import ray._private.utils

    cpus = ray_adapter.local_cpus()
    contract("ray._private.utils.get_num_cpus (local_cpus)", isinstance(cpus, int) and cpus >= 1, f"{cpus!r}")
    monkeypatch.delattr(ray._private.utils, "get_num_cpus")
    assert ray_adapter.local_cpus() == len(os.sched_getaffinity(0))


def test_tune_still_gives_trial_actors_pl_disable_fork_and_without_it_nothing_is_patched(monkeypatch):
    from ray.tune.execution import class_cache

    contract(
        "ray.tune.execution.class_cache.DEFAULT_ENV_VARS['PL_DISABLE_FORK'] (bare_trial_actors)",
        isinstance(class_cache.DEFAULT_ENV_VARS, dict)
        and '"PL_DISABLE_FORK"' in Path(class_cache.__file__).read_text(),
        "If Tune no longer sets it, bare_trial_actors can go; if it sets another one, drop that one too.",
    )
    monkeypatch.setattr(class_cache, "DEFAULT_ENV_VARS", {"PL_DISABLE_FORK": "1", "OTHER": "x"})
    assert ray_adapter.bare_trial_actors() is True
    assert class_cache.DEFAULT_ENV_VARS == {"OTHER": "x"}
    monkeypatch.delattr(class_cache, "DEFAULT_ENV_VARS")  # a Tune without those defaults
    assert ray_adapter.bare_trial_actors() is False


def test_the_session_dir_is_in_what_ray_init_returns():
    from types import SimpleNamespace

    from ray._private.worker import RayContext

    context = SimpleNamespace(address_info={"session_dir": "/tmp/ray/session_x", "node_id": "n"})
    assert ray_adapter.session_dir(context) == Path("/tmp/ray/session_x")
    contract(
        "ray.init's RayContext.address_info['session_dir'] (session_dir)",
        "self.address_info = address_info" in inspect.getsource(RayContext.__init__)
        and '"session_dir"' in inspect.getsource(importlib.import_module("ray._private.node")),
    )


def test_raylet_sets_the_node_id_in_its_processes():
    # the agents that outlive a killed driver read it from the environment the raylet gives them
    agent = (RAY / "dashboard" / "agent.py").read_text()
    contract(
        f"{ray_adapter.NODE_ID_ENV} in the environment of the raylet's processes (NODE_ID_ENV, local_ray)",
        f'os.environ["{ray_adapter.NODE_ID_ENV}"]' in agent,
    )


def test_session_directories_are_named_session_star():
    from ray._private import node

    contract(
        "Ray's session directory names (SESSION_GLOB, local_ray)",
        'f"session_{date_str}' in inspect.getsource(node) and ray_adapter.SESSION_GLOB == "session_*",
    )


def test_the_job_config_variable():
    from ray._private.runtime_env import constants

    contract(
        "RAY_JOB_CONFIG_JSON_ENV_VAR (JOB_CONFIG_ENV, trial_env.missing_in_job)",
        getattr(constants, "RAY_JOB_CONFIG_JSON_ENV_VAR", None) == ray_adapter.JOB_CONFIG_ENV,
    )


# -- Tune ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variable",
    [
        "RAY_AIR_NEW_OUTPUT",
        "TUNE_GLOBAL_CHECKPOINT_S",
        "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S",
        "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS",
    ],
)
def test_tune_reads_its_environment_switches(variable, monkeypatch):
    monkeypatch.delenv(variable, raising=False)
    ray_adapter.quiet_tune_driver()
    import os

    contract(
        f"Tune's environment variable {variable} (quiet_tune_driver)",
        variable in os.environ and f'"{variable}"' in _ray_python_source("tune", "air", "train"),
    )


def test_a_trial_worker_reads_its_wait_for_the_last_trials_thread(monkeypatch):
    from ray.tune.trainable import function_trainable

    variable = ray_adapter.TRIAL_THREAD_WAIT_ENV
    monkeypatch.delenv(variable, raising=False)
    ray_adapter.wait_for_stopped_trial_threads()
    source = inspect.getsource(function_trainable.FunctionTrainable.reset_config)
    contract(
        f"Tune's environment variable {variable} (wait_for_stopped_trial_threads, read in reset_config)",
        os.environ[variable] == "30" and f'"{variable}"' in source and "is_alive()" in source,
        "Without it a worker whose stopped trial takes over 2 s to end is replaced by a new one.",
    )


def test_checkpoint_logs_are_quieted_through_the_ray_train_logger():
    import logging

    from ray.train._internal import storage

    saved = logging.getLogger("ray.train").level
    try:
        ray_adapter.quiet_checkpoint_logs()
        contract(
            "Ray Train's storage logs under the ray.train logger (quiet_checkpoint_logs)",
            storage.logger.name.startswith("ray.train.")
            and storage.logger.getEffectiveLevel() >= logging.WARNING,
        )
    finally:
        logging.getLogger("ray.train").setLevel(saved)


def test_a_stop_inside_tune_report_is_system_exit_zero_which_ends_the_thread_cleanly():
    from ray.air._internal.util import RunnerThread
    from ray.train._internal.session import _TrainSession

    report = inspect.getsource(_TrainSession._report_training_result)
    contract(
        "tune.report raising SystemExit(0) when Tune stops the trial (report -> TrialStopped)",
        "stop_event.is_set()" in report and "sys.exit(0)" in report,
    )
    contract(
        "Tune's runner thread taking SystemExit(0) as a clean end (end_stopped_trial)",
        "except SystemExit" in inspect.getsource(RunnerThread.run),
    )


def _trial_with_a_checkpoint(tmp_path):
    from ray.train import Checkpoint
    from ray.train._internal.session import _TrainingResult
    from ray.tune.experiment import Trial

    trial = Trial("tune_trial", stub=True, trial_id="t1")
    directory = tmp_path / "checkpoint"
    directory.mkdir()
    checkpoint = Checkpoint.from_directory(str(directory))
    trial.run_metadata.checkpoint_manager.register_checkpoint(
        _TrainingResult(checkpoint=checkpoint, metrics={"training_iteration": 1})
    )
    return trial


def test_a_trial_checkpoint_can_be_forgotten(tmp_path):
    trial = _trial_with_a_checkpoint(tmp_path)
    contract("Trial.checkpoint from run_metadata.checkpoint_manager", trial.checkpoint is not None)
    assert ray_adapter.forget_checkpoint(trial) is True
    contract(
        "Tune's checkpoint manager rebuilt from its class and checkpoint_config (forget_checkpoint)",
        trial.checkpoint is None,
    )


def test_where_tunes_checkpoint_manager_changed_the_trial_keeps_its_checkpoint(tmp_path, monkeypatch, caplog):
    trial = _trial_with_a_checkpoint(tmp_path)
    manager = trial.run_metadata.checkpoint_manager

    def changed(self, *args, **kwargs):  # a Tune release whose manager is built another way
        raise TypeError("__init__() takes other arguments")

    monkeypatch.setattr(type(manager), "__init__", changed)
    assert ray_adapter.forget_checkpoint(trial) is False
    assert trial.checkpoint is not None and trial.run_metadata.checkpoint_manager is manager
    assert "lost checkpoint cannot be dropped" in caplog.text


def test_tune_on_disk_layout():
    from ray.air import constants
    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.impl import tuner_internal

    contract(
        "Tune's trial error pickle name (TRIAL_ERROR_PICKLE)",
        constants.EXPR_ERROR_PICKLE_FILE == ray_adapter.TRIAL_ERROR_PICKLE,
    )
    state_files = (TuneController.CKPT_FILE_TMPL.format("x"), tuner_internal._TUNER_PKL)
    contract(
        "Tune's experiment-level state files (EXPERIMENT_STATE_SUFFIXES)",
        all(Path(name).suffix in ray_adapter.EXPERIMENT_STATE_SUFFIXES for name in state_files),
        f"{state_files}",
    )


# -- preflight ----------------------------------------------------------------------------------------------


def test_the_cluster_metadata_that_preflight_reads():
    from ray._common.usage import usage_constants, usage_lib
    from ray._private import ray_constants, services
    from ray._raylet import GcsClient  # noqa: F401
    from ray.dashboard.modules.dashboard_sdk import SubmissionClient
    from ray.dashboard.modules.reporter import reporter_head

    metadata = usage_lib._generate_cluster_metadata(ray_init_cluster=False)
    contract(
        "Ray's cluster metadata (ray_version, python_version) in the GCS (cluster_versions)",
        {"ray_version", "python_version"} <= set(metadata)
        and hasattr(usage_constants, "CLUSTER_METADATA_KEY")
        and hasattr(ray_constants, "KV_NAMESPACE_CLUSTER")
        and callable(getattr(services, "canonicalize_bootstrap_address_or_die", None)),
    )
    contract(
        "the dashboard's /api/v0/cluster_metadata and SubmissionClient._do_request (dashboard_versions)",
        f'"{ray_adapter.CLUSTER_METADATA_PATH}"' in inspect.getsource(reporter_head)
        and callable(getattr(SubmissionClient, "_do_request", None)),
    )


def test_without_rays_gcs_client_the_preflight_leaves_the_check_to_ray_init(monkeypatch):
    import ray._raylet

    monkeypatch.delattr(ray._raylet, "GcsClient")
    assert ray_adapter.cluster_versions("127.0.0.1:1") is None
    ray_adapter.check_cluster("127.0.0.1:1")  # nothing to compare: no error, no connection tried


def test_ray_inits_own_version_error_becomes_the_preflights_one_line(monkeypatch):
    from ray._private.utils import check_version_info

    monkeypatch.setenv("RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL", "patch")
    driver = ray_adapter.driver_versions()
    with pytest.raises(RuntimeError) as raised:  # Ray's own check, as ray.init runs it
        check_version_info({"ray_version": "2.58.0", "python_version": driver.python}, "node 10.0.0.1")
    refusal = ray_adapter.init_error(raised.value, "10.0.0.5:6379")
    contract("ray.init's version mismatch error (init_error)", isinstance(refusal, ClusterMismatch))
    line = str(refusal)
    assert "\n" not in line and line.startswith("--address 10.0.0.5:6379: the cluster runs Ray 2.58.0")
    assert f"this driver Ray {driver.ray} on Python {driver.python}" in line
    assert 'pip install "ray[default,tune]==2.58.0"' in line
    assert ray_adapter.init_error(RuntimeError("no route to host"), "10.0.0.5:6379") is None
    token = ray_adapter.init_error(RuntimeError("UNAUTHENTICATED: invalid token"), "10.0.0.5:6379")
    assert isinstance(token, ClusterMismatch) and "token" in str(token)


class _Response:
    status_code = 200

    @staticmethod
    def json():
        return {"data": {"rayVersion": "2.58.0", "pythonVersion": "3.11.7"}}


class _Client:
    def _do_request(self, method: str, path: str) -> _Response:
        assert (method, path) == ("GET", ray_adapter.CLUSTER_METADATA_PATH)
        return _Response()


def test_the_dashboards_versions_both_ways(monkeypatch, caplog):
    assert ray_adapter.dashboard_versions(_Client(), "http://h:8265") == Versions("2.58.0", "3.11.7")
    with pytest.raises(ClusterMismatch, match=r'pip install "ray\[default,tune\]==2.58.0"'):
        ray_adapter.check_dashboard(_Client(), "http://h:8265")
    monkeypatch.delattr(_Client, "_do_request")  # a Ray whose job client lacks the method
    assert ray_adapter.dashboard_versions(_Client(), "http://h:8265") is None
    ray_adapter.check_dashboard(_Client(), "http://h:8265")  # sent unchecked, saying so
    assert "unchecked" in caplog.text


def test_a_cluster_ray_outside_the_range_is_named():
    supported = ray_adapter.supported_ray()
    assert supported is not None and supported.contains("2.55.0") and supported.contains("2.60.0")
    line = ray_adapter.version_mismatch(Versions("2.40.0", "3.11.7"), Versions("2.60.0", "3.11.7"), "x")
    assert line is not None and f"dicelab supports Ray {supported}" in line


@pytest.mark.parametrize(
    ("cluster", "driver", "level", "differs"),
    [
        (("2.60.0", "3.11.7"), ("2.60.0", "3.11.7"), "patch", False),
        (("2.61.0", "3.11.7"), ("2.60.0", "3.11.7"), "patch", True),
        (("2.60.0", "3.11.9"), ("2.60.0", "3.11.7"), "patch", True),
        (("2.60.0", "3.11.9"), ("2.60.0", "3.11.7"), "minor", False),
        (("2.60.0", "3.12.1"), ("2.60.0", "3.11.7"), "minor", True),
    ],
)
def test_versions_differ_as_ray_compares_them(monkeypatch, cluster, driver, level, differs):
    monkeypatch.setenv("RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL", level)
    line = ray_adapter.version_mismatch(Versions(*cluster), Versions(*driver), "--address 10.0.0.1:6379")
    assert (line is not None) == differs
    if differs:
        assert line is not None and "\n" not in line
        assert f"Ray {cluster[0]} on Python {cluster[1]}" in line
        assert f"Ray {driver[0]} on Python {driver[1]}" in line


def test_the_mismatch_is_a_user_error_with_exit_code_2():
    assert issubclass(ClusterMismatch, DicelabError) and ClusterMismatch.exit_code == 2


# -- nothing else touches Ray's internals -------------------------------------------------------------------

PRIVATE = ("ray._private", "ray._raylet", "ray._common", "ray.train._internal", "ray.autoscaler._private")
ADAPTER = ROOT / "platform" / "dicelab" / "sweeps" / "ray_adapter.py"


def _private_touches(path: Path) -> list[str]:
    """Imports of Ray's private modules, `ray.<...>._x` attribute chains, and the patched class_cache."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute):
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "ray":
                names = [".".join(["ray", *reversed(chain)])]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value] if node.value.startswith(PRIVATE) else []
        for name in names:
            if name.startswith(PRIVATE) or name.endswith(".class_cache") or ".class_cache." in name:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    return found


def test_no_module_but_the_adapter_touches_ray_internals():
    modules = [*(ROOT / "platform" / "dicelab").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    touches = [touch for path in modules if path != ADAPTER for touch in _private_touches(path)]
    assert not touches, "Ray internals outside dicelab.sweeps.ray_adapter:\n" + "\n".join(touches)
    assert _private_touches(ADAPTER), "the check finds nothing in the adapter: it has gone blind"
