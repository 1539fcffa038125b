"""Test tiers, by construction (docs/development.md):

- `integration`: the test starts Ray or a server. Nobody marks it by hand: a test is marked here when it lives
  under tests/integration/ or uses a fixture that starts such a process: one named in STARTS_PROCESSES, or one
  whose name says so (a word `ray`, `cluster` or `server` in it: `ray_cluster`, `mlflow_server`,
  `server`). Fixtures that start processes are named that way.
- `slow`: marked by hand (more than ~20 s on 2 cores without starting Ray or a server).
- the unit tier is everything else, and it stays free of processes: a test not marked `integration` that
  starts Ray (in process: Ray's own `gcs_server` / `raylet`), `ray start`, `mlflow server|ui|models serve` or
  `dicelab sweep|submit|ui` fails at once, telling its author how to mark it.

`make test` runs every test in one session on two pytest-xdist workers, a file at a time (`--dist
loadfile`), in the order of LONGEST_FIRST and then the rest: a worker's files share its Ray cluster and MLflow
server (session fixtures). Every integration test is also in one xdist group, so a `-n 2 --dist loadgroup`
run keeps them on one worker.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

# A test process imports torch, transformers, MLflow, Ray and the analysis's libraries while it collects:
# with Python's first threshold of 700, 18 full collections walked that growing heap (4.4 of the 21 CPU-s
# the collection took); at 50,000, none. The suite's own processes only: dicelab leaves the collector alone.
gc.set_threshold(50_000, *gc.get_threshold()[1:])

TESTS = Path(__file__).resolve().parent
# The repository root, which a run leaves as it found it (checked at the session's end, below); None where
# this conftest is not in a checkout (a copy in a pytester directory).
ROOT = TESTS.parent if (TESTS.parent / "pyproject.toml").is_file() else None
# The one entry the Makefile creates in the root on purpose (ignored by git); the tools' caches are inside it.
ROOT_TOOL_ENTRIES = frozenset({".venv"})
# Hypothesis keeps its files (the example database, its constants cache) in the user's cache, not in a
# .hypothesis/ of the working directory, the root.
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY",
    str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dicelab" / "hypothesis"),
)
# Fixtures that start Ray or a server without the word in their name.
STARTS_PROCESSES = frozenset({"sweep_tools"})
STARTS_BY_NAME = re.compile(r"(?:^|_)(?:ray|cluster|server)(?:_|$)")
INTEGRATION_DIRS = (TESTS / "integration",)
INTEGRATION_GROUP = "integration"  # the xdist group of every integration test
# The longest files first, the longest first (times in docs/development.md): two
# xdist workers taking files in this order (`--dist loadfile --no-loadscope-reorder`, as `make test` does)
# end close together instead of one starting a long file when the other is done. Every other file keeps its
# place after these. Only the order: a file missing here runs all the same.
LONGEST_FIRST = (
    "integration/test_sweep_cluster.py",
    "integration/test_team_server_load.py",
    "integration/faults/test_fault_node.py",
    "integration/faults/test_fault_driver.py",
    "integration/test_sweep_local.py",
    "test_api.py",
    "benchmarks/test_scale_benchmarks.py",
    "integration/faults/test_fault_disk_full.py",
    "integration/test_sweep_plugins.py",
    "infra/test_infra_local_cluster.py",
    "integration/test_warm_workers.py",
    "models/test_model_portability.py",
    # The longest files of the unit tier (about 30 to 55 CPU-s each), so they do not start last.
    "tasks/test_tasks_families.py",
    "analysis/test_analysis_large.py",
    "benchmarks/test_gpu_check.py",
    "analysis/test_analysis_report.py",
    "models/test_models.py",
    "analysis/test_analysis_decisions.py",
    "test_cli.py",
    "losses/test_losses_contract.py",
    "analysis/test_analysis_cost.py",
    "sweeps/test_sweep_racing.py",
)
# Ray's start-up waits, raised for a 2-core machine running two test workers (and other work) at once: the
# head's GCS port file (30 s by default), connecting to the GCS (20 tries of about 1 s), a core worker
# waiting for its raylet, a new worker process registering with the raylet (60 s). Only waits: a start-up that
# fails still fails, later.
RAY_START_UP_WAITS = {
    "RAY_gcs_server_port_wait_time_s": "120",
    "RAY_NUM_REDIS_GET_RETRIES": "120",
    "RAY_raylet_start_wait_time_s": "120",
    "RAY_worker_register_timeout_seconds": "180",
}


def starts_processes(fixture_names: list[str]) -> list[str]:
    """The fixtures among `fixture_names` (a test's, transitively) that start Ray or a server."""
    return [name for name in fixture_names if name in STARTS_PROCESSES or STARTS_BY_NAME.search(name)]


def _in_integration_dir(item: pytest.Item) -> bool:
    path = Path(str(item.path)).resolve()
    return any(path.is_relative_to(directory) for directory in INTEGRATION_DIRS)


def pytest_configure(config: pytest.Config) -> None:
    # The MLflow servers tests start run without MLflow's GenAI job runner, as `dicelab ui` and the compose
    # file do (each server would otherwise bring seven huey_consumer processes of ~257 MB).
    os.environ["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    for key, value in RAY_START_UP_WAITS.items():  # a local Ray a test starts in process or in a kernel
        os.environ.setdefault(key, value)
    # Every process a test starts goes through Popen (Ray's gcs_server and raylet included): see below.
    subprocess.Popen.__init__ = _guarded_popen_init  # type: ignore[method-assign]


def run_order(item: pytest.Item) -> int:
    """Where `item`'s file comes in LONGEST_FIRST (every test of a file alike, so a file stays together)."""
    path = Path(str(item.path)).resolve()
    name = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else ""
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=run_order)  # stable: the rest keep their order
    for item in items:
        if _in_integration_dir(item) or starts_processes(list(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("integration") is not None:
            item.add_marker(pytest.mark.xdist_group(INTEGRATION_GROUP))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection imported (torch, transformers, MLflow, Ray, pandas) is left out of every later full
    # collection: statsmodels' Holm and a trial's end call gc.collect(), which otherwise walks that whole heap
    # (about 0.5 CPU-s a call). What a test allocates is still collected.
    gc.freeze()


@pytest.fixture(scope="session")
def start_up_waits() -> dict[str, str]:
    """RAY_START_UP_WAITS, for the environment of the processes integration tests start."""
    return dict(RAY_START_UP_WAITS)


# -- the unit tier starts no process of Ray or a server ------------------------------------------------------

_RAY_PROGRAMS = {"gcs_server", "raylet"}
_DICELAB_STARTERS = {"sweep", "submit", "ui"}


def starts_ray_or_a_server(args: Any) -> str | None:
    """What a command line would start ("Ray", "an MLflow server", "`dicelab sweep`"), or None."""
    words = args.split() if isinstance(args, str) else [os.fspath(arg) for arg in args]
    names = [os.path.basename(word) for word in words]
    if "--help" in words or "-h" in words:
        return None
    for index, name in enumerate(names):
        rest = names[index + 1 : index + 2]
        if name in _RAY_PROGRAMS or (name == "ray" and rest == ["start"]):
            return "Ray"
        if name == "mlflow" and rest and rest[0] in ("server", "ui"):
            return "an MLflow server"
        if name == "mlflow" and names[index + 1 : index + 3] == ["models", "serve"]:
            return "an MLflow scoring server"
        if name in ("dicelab", "dicelab.cli") and rest and rest[0] in _DICELAB_STARTERS:
            return f"`dicelab {rest[0]}`"
    return None


_unit_test: list[str] = []  # the node id of the unit-tier test now running, if any
_original_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self: subprocess.Popen, args: Any, *rest: Any, **options: Any) -> None:
    if _unit_test:
        started = starts_ray_or_a_server(args)
        if started is not None:
            raise pytest.fail.Exception(
                f"{_unit_test[0]} starts {started} but is not an integration test: use the shared fixtures "
                "(ray_cluster, mlflow_server, sweep_tools) or a fixture named *_cluster / *_server, or put "
                "it under tests/integration/ (docs/development.md)"
            )
    _original_popen_init(self, args, *rest, **options)


# -- a run leaves the repository root as it found it ---------------------------------------------------------

_root_before: list[
    set[str]
] = []  # the root's entries when the session started (the controller's, under xdist)


def root_entries() -> set[str]:
    return set(os.listdir(ROOT)) if ROOT is not None else set()


def new_root_entries(before: set[str], after: set[str]) -> list[str]:
    """What a run added to the repository root, but for the tools' own entries."""
    return sorted(after - before - ROOT_TOOL_ENTRIES)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # xdist's workers run inside the controller's session
        _root_before.append(root_entries())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _root_before:
        return
    added = new_root_entries(_root_before.pop(), root_entries())
    if added:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (
            f"the tests left {', '.join(added)} in the repository root {ROOT}: a test or fixture writes "
            "to the working directory (MLflow's default ./mlruns artifact root or ./mlflow.db, for one); "
            "give it a tmp_path"
        )
        if reporter is not None:
            reporter.write_line(f"ERROR: {message}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    subprocess.Popen.__init__ = _original_popen_init  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    # Setup included: a session fixture that starts a server is caught at the first test that asks for it.
    unit = item.get_closest_marker("integration") is None
    if unit:
        _unit_test.append(item.nodeid)
    try:
        return (yield)
    finally:
        if unit:
            _unit_test.clear()
