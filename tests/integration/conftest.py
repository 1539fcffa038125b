"""Real components for the integration tests, started here and stopped by process group id:

- a two-node Ray cluster on 127.0.0.1 (`ray start --head` plus a worker node, one CPU and one declared GPU
  each) with token authentication (RAY_AUTH_MODE=token, the token in a file of the session's temp dir) and
  its own temp dir, shared by the tests that run one after another in a test process (SharedCluster),
- an MLflow tracking server over HTTP (SQLite backend, local artifact store).

Every port is a free one, so the tests never meet another Ray cluster or server on the machine.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow import MlflowClient
from mlflow.entities import Run
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID
from tests.ports import free_port
from tests.processes import Process, dump_stacks, start

from dicelab.sweeps.local_ray import _descendants
from dicelab.tracking import conventions as names
from dicelab.tracking.sqlite_template import start_from_template

BIN = Path(sys.executable).parent  # the venv's bin: ray, mlflow, dicelab


def wait_until(
    predicate: Any, timeout_s: float, what: str, process: Process | None = None, every_s: float = 0.5
) -> Any:
    """predicate()'s first true value, asked every `every_s` seconds (a look at a sweep's store costs its
    server and this process CPU: tests that wait on a sweep's trials ask every 1.5 s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.popen.poll() is not None:
            raise RuntimeError(f"{process.name} exited: {process.log.read_text()[-3000:]}")
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    tail = ""
    if process is not None:
        process.dump_stacks()
        tail = process.log.read_text()[-12000:]
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}\n{tail}")


@pytest.fixture(scope="session")
def session_dir() -> Iterator[Path]:
    # Short, so Ray's socket paths under its temp dir stay below the 107-character limit of Unix sockets.
    path = Path(tempfile.mkdtemp(prefix="dl-it-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_env(session_dir: Path, start_up_waits: dict[str, str]) -> dict[str, str]:
    """Environment of every process of these tests: the cluster's token auth, Ray's start-up waits of a busy
    machine (tests/conftest.py), this venv first on PATH."""
    token = session_dir / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "MLFLOW_"))}
    env.update(
        start_up_waits,
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN_PATH=str(token),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        # MLflow servers without the GenAI job runner (seven huey_consumer processes each), as `dicelab ui`
        # and infra/mlflow's compose file run them
        MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
    )
    return env


@dataclass
class RayCluster:
    address: str  # GCS, for `dicelab sweep --address`
    dashboard: str  # http://..., for `dicelab submit --address`
    nodes: list[Process]  # the `ray start --block` of each node, head first (each in its own process group)
    node_ids: list[str]  # Ray's node id of each node, in the same order
    directory: Path  # the nodes' temp dirs and logs
    env: dict[str, str]
    worker_args: list[str]  # `ray start` of a worker node, but its temp dir and ports

    def add_node(self) -> str:
        """A worker node like the first joining the running cluster (as a machine an autoscaler adds):
        `ray start --address` in a process group of its own, stopped with the cluster (or killed by
        kill_node, by its index). Returns its node id once the cluster lists it alive."""
        index = len(self.nodes)
        known = set(self.node_ids)
        name = f"ray-node{index}"
        args = [*self.worker_args, f"--temp-dir={self.directory / name}", *_node_ports()]
        self.nodes.append(start_ray_node(name, args, self.env, self.directory))

        def joined() -> str | None:
            found = [node["node_id"] for node in alive_nodes(self.dashboard, self.env)]
            return next((node for node in found if node not in known), None)

        self.node_ids.append(wait_until(joined, 180, f"the {name} node to join", self.nodes[-1]))
        return self.node_ids[-1]

    def kill_node(self, index: int) -> list[int]:
        """The machine of node `index` lost: SIGKILL every descendant of its `ray start` (raylet, agents and
        the workers, which Ray starts in process groups of their own and without RAY_NODE_ID in their
        environment: found as the raylet's children, before it dies), then its process group. Returns the
        descendants killed."""
        found = _descendants(self.nodes[index].popen.pid)
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.nodes[index].kill()
        return found


def state_list(dashboard: str, resource: str, env: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    """Ray's state API (what `ray list RESOURCE --address DASHBOARD` asks) over HTTP, with the cluster's
    token from `env`: a `ray list` process costs about 3.5 CPU-seconds (it imports Ray), this a request.
    `params` are the API's query options (limit, detail, filter_keys/_predicates/_values)."""
    headers = {}
    token_path = env.get("RAY_AUTH_TOKEN_PATH")
    if token_path:
        headers["authorization"] = f"Bearer {Path(token_path).read_text().strip()}"
    query = urllib.parse.urlencode({"limit": 1000, **params}, doseq=True)
    request = urllib.request.Request(f"{dashboard}/api/v0/{resource}?{query}", headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.load(response)
    if answer.get("result") is False:
        raise RuntimeError(f"Ray's state API refused {resource}: {answer.get('msg')}")
    return answer["data"]["result"]["result"]


def alive_nodes(dashboard: str, env: dict[str, str]) -> list[dict[str, Any]]:
    """The ALIVE nodes (node_id, is_head_node, ...) as `ray list nodes` gives them; [] while the cluster
    can't answer."""
    try:
        return state_list(
            dashboard, "nodes", env, filter_keys="state", filter_predicates="=", filter_values="ALIVE"
        )
    except (OSError, ValueError, KeyError, RuntimeError):
        return []


def _node_ports() -> list[str]:
    return [
        f"--node-manager-port={free_port()}",
        f"--object-manager-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        "--min-worker-port=0",  # random free ports for worker processes
        "--max-worker-port=0",
    ]


def _started(node: Process) -> bool:
    """`ray start` says its node is up. A file read: polling `ray list nodes` (a process each time) while a
    node registers loads the GCS enough, on a busy 2-core machine, for the node's start to time out."""
    return b"Ray runtime started" in node.log.read_bytes()


RAY_START_TIMED_OUT = b"timed out during startup"  # `ray start`'s raylet missed one of its fixed waits
RAY_NODE_STARTS = 3


def start_ray_node(name: str, args: list[str], env: dict[str, str], directory: Path) -> Process:
    """`ray start ARGS` of one node, waited for until it says it started. Its raylet has fixed waits (30 s to
    register with the GCS, about 15 s for its dashboard agent's port file) that a loaded 2-core machine can
    miss: a node that exits saying so is stopped and started again, up to RAY_NODE_STARTS times in all (each
    earlier log kept as NAME-<attempt>.log); any other exit fails at once."""
    for attempt in range(1, RAY_NODE_STARTS + 1):
        node = start(name, args, env, directory)
        node.leader_first = True
        try:
            wait_until(lambda: _started(node), 180, f"the {name} node to start", node)  # noqa: B023
            return node
        except BaseException as error:
            node.stop()
            exited = isinstance(error, RuntimeError)  # wait_until's "exited", not a timeout or Ctrl-C
            last = attempt == RAY_NODE_STARTS
            if not exited or last or RAY_START_TIMED_OUT not in node.log.read_bytes():
                raise
            node.log.rename(directory / f"{name}-{attempt}.log")
    raise AssertionError("unreachable")


@contextlib.contextmanager
def two_node_cluster(
    directory: Path, env: dict[str, str], node_args: Sequence[str] = ()
) -> Iterator[RayCluster]:
    """A head and a worker node (one CPU each, plus `node_args` such as "--num-gpus=1") on 127.0.0.1, their
    temp dirs and logs under `directory` (keep it short: Ray's socket paths must stay below 107
    characters); stopped on exit."""
    port, dashboard_port = free_port(), free_port()
    common = ["--num-cpus=1", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1", *node_args]
    processes: list[Process] = []
    try:
        head = start_ray_node(
            "ray-head",
            [
                str(BIN / "ray"),
                "start",
                "--head",
                f"--port={port}",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={dashboard_port}",
                f"--ray-client-server-port={free_port()}",
                f"--temp-dir={directory / 'ray'}",
                *common,
                *_node_ports(),
            ],
            env,
            directory,
        )
        processes.append(head)
        dashboard = f"http://127.0.0.1:{dashboard_port}"
        first = wait_until(lambda: alive_nodes(dashboard, env), 180, "the Ray head node", head)
        worker_args = [str(BIN / "ray"), "start", f"--address=127.0.0.1:{port}", *common]
        worker = start_ray_node(
            "ray-worker",
            [
                *worker_args,
                # its own temp dir, as on another machine: nodes sharing one would also share (and delete)
                # each other's runtime-env files, such as a job's working directory
                f"--temp-dir={directory / 'ray-worker'}",
                *_node_ports(),
            ],
            env,
            directory,
        )
        processes.append(worker)

        def two_alive() -> list[dict[str, Any]]:
            found = alive_nodes(dashboard, env)
            return found if len(found) >= 2 else []

        both = wait_until(two_alive, 180, "the Ray worker node", worker)
        head_id = first[0]["node_id"]
        worker_id = next(node["node_id"] for node in both if node["node_id"] != head_id)
        yield RayCluster(
            f"127.0.0.1:{port}", dashboard, processes, [head_id, worker_id], directory, env, worker_args
        )
    finally:
        for process in reversed(processes):
            process.stop()


# Every node of the shared cluster declares one GPU (Ray declares GPUs a CPU machine lacks): the GPU packing
# test reserves fractions of them; trials asking for no GPU are placed as on a cluster without any.
SHARED_CLUSTER_ARGS = ("--num-gpus=1",)


class SharedCluster:
    """The shared cluster of one test process (an xdist worker runs whole files, `--dist loadfile`): started
    by the first test that asks for `ray_cluster`, stopped as soon as the next test this process runs does
    not ask for it (an idle two-node cluster takes about 0.085 CPU-seconds a second: 5 a minute), and
    started again, into the same RayCluster object, if a later test asks for it once more."""

    def __init__(self) -> None:
        self.cluster: RayCluster | None = None
        self.running: contextlib.ExitStack | None = None
        self.starts = 0

    def start(self, session_dir: Path, env: dict[str, str]) -> RayCluster:
        if self.running is None:
            self.starts += 1
            directory = session_dir / f"c{self.starts}"  # short: Ray's socket paths
            directory.mkdir()
            stack = contextlib.ExitStack()
            started = stack.enter_context(two_node_cluster(directory, env, SHARED_CLUSTER_ARGS))
            self.running = stack
            if self.cluster is None:
                self.cluster = started
            else:  # the tests keep the object the session fixture gave them
                vars(self.cluster).update(vars(started))
        assert self.cluster is not None
        return self.cluster

    def stop(self) -> None:
        running, self.running = self.running, None
        if running is not None:
            running.close()


_SHARED = SharedCluster()
_SHARED_ENV = pytest.StashKey[tuple[Path, dict[str, str]]]()


@pytest.fixture(scope="session")
def ray_cluster(
    request: pytest.FixtureRequest, session_dir: Path, ray_env: dict[str, str]
) -> Iterator[RayCluster]:
    """The cluster the integration tests share (a fault that kills a node starts its own: own_ray_cluster);
    see SharedCluster for when it runs."""
    request.config.stash[_SHARED_ENV] = (session_dir, ray_env)
    try:
        yield _SHARED.start(session_dir, ray_env)
    finally:
        _SHARED.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that asks for the shared cluster after it was stopped gets it started again."""
    found = item.config.stash.get(_SHARED_ENV, None)
    if found is not None and "ray_cluster" in getattr(item, "fixturenames", ()):
        _SHARED.start(*found)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The shared cluster stops when the next test does not ask for it (or there is none)."""
    if nextitem is None or "ray_cluster" not in getattr(nextitem, "fixturenames", ()):
        _SHARED.stop()


@pytest.fixture
def own_ray_cluster(request: pytest.FixtureRequest, ray_env: dict[str, str]) -> Iterator[RayCluster]:
    """A two-node cluster of this test alone, free to be broken. Parametrized indirectly, its value is more
    `ray start` options for both nodes (e.g. ["--num-gpus=1"]: Ray declares GPUs a CPU machine lacks)."""
    directory = Path(tempfile.mkdtemp(prefix="dl-c-", dir="/tmp"))  # short: Ray's socket paths
    try:
        with two_node_cluster(directory, ray_env, getattr(request, "param", ())) as cluster:
            yield cluster
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def mlflow_server_command(store: Path, port: int) -> list[str]:
    """`mlflow server` on 127.0.0.1:`port` with one worker, its SQLite store and artifacts in `store` (a new
    store starts as a copy of MLflow's empty schema, as `dicelab`'s own stores do: no migrations to run)."""
    start_from_template(store / "mlflow.db")
    return [
        str(BIN / "mlflow"),
        "server",
        "--host=127.0.0.1",
        f"--port={port}",
        "--workers=1",
        f"--backend-store-uri=sqlite:///{store / 'mlflow.db'}",
        f"--artifacts-destination={store / 'artifacts'}",
    ]


def mlflow_healthy(uri: str) -> bool:
    """Whether the MLflow server at `uri` answers /health."""
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def mlflow_command() -> Callable[[Path, int], list[str]]:
    """mlflow_server_command, for test modules that start a server of their own."""
    return mlflow_server_command


@pytest.fixture(scope="session")
def mlflow_server(session_dir: Path, ray_env: dict[str, str]) -> Iterator[str]:
    store = session_dir / "mlflow"
    store.mkdir()
    port = free_port()
    server = start("mlflow-server", mlflow_server_command(store, port), ray_env, session_dir)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: mlflow_healthy(uri), 120, "the MLflow server", server)
        yield uri
    finally:
        server.stop()


# -- what the tests use ------------------------------------------------------------------------------------

TINY_TRIAL: dict[str, Any] = {
    "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 64, "n_dev": 32}, "max_length": 32},
    "model": {"backbone": "tiny-bert"},
    "train": {"epochs": 2, "batch_size": 16, "learning_rate": 1.0e-3, "eval_batch_size": 32},
    "tracking": {"log_predictions": False},
}


@dataclass
class SweepTools:
    env: dict[str, str]

    @staticmethod
    def write_sweep(directory: Path, name: str, search: dict[str, Any], **sections: Any) -> Path:
        """A tiny sweep config (tiny-bert, a few dozen synthetic pairs) with the given search section."""
        data: dict[str, Any] = {"name": name, **yaml.safe_load(yaml.safe_dump(TINY_TRIAL))}
        for key, value in sections.items():
            data[key] = {**data.get(key, {}), **value}
        data["search"] = {"resources": {"cpu": 1}, **search}
        path = directory / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def run(
        self, args: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """`dicelab ARGS`, to the end; on timeout its whole process group (a local Ray included) is killed."""
        return self.run_command([str(BIN / "dicelab"), *args], cwd, timeout_s, env)

    @staticmethod
    def run_here(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
        """`dicelab ARGS` run in this process, in `cwd`, with this process's environment less
        MLFLOW_TRACKING_URI (the store is the command's default or its --tracking-uri, as for `run`): the same
        command without a second interpreter importing MLflow, pandas and matplotlib again (about 4 CPU-s
        each). For commands that end on their own, start nothing and load no plugin (`analyze`, `export`,
        `ui --experiment`): a plugin loaded here would stay in this process's registries."""
        from dicelab.cli.dispatch import main

        stdout, stderr, argv = io.StringIO(), io.StringIO(), sys.argv[:]
        with (
            pytest.MonkeyPatch.context() as patch,
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            patch.chdir(cwd)
            patch.delenv("MLFLOW_TRACKING_URI", raising=False)
            try:
                code = main(args)
            finally:
                sys.argv = argv
        return subprocess.CompletedProcess(["dicelab", *args], code, stdout.getvalue(), stderr.getvalue())

    def run_command(
        self, args: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """A command, to the end, in its own process group: on timeout the whole group is killed."""
        popen = subprocess.Popen(
            args,
            env=env or self.env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = popen.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            dump_stacks(popen, Path(args[0]).name)
            os.killpg(popen.pid, signal.SIGKILL)
            stdout, stderr = popen.communicate()
            raise AssertionError(
                f"{' '.join(args)} timed out after {timeout_s}s:\n{stdout}\n{stderr}"
            ) from None
        except BaseException:  # Ctrl-C or pytest-timeout: the command (and its local Ray) goes too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            raise
        return subprocess.CompletedProcess(popen.args, popen.returncode, stdout, stderr)

    def start(self, args: list[str], cwd: Path) -> Process:
        """`dicelab ARGS` in its own process group, its output in cwd/dicelab.log."""
        return start("dicelab", [str(BIN / "dicelab"), *args], self.env, cwd)

    wait_until = staticmethod(wait_until)
    free_port = staticmethod(free_port)
    mlflow_healthy = staticmethod(mlflow_healthy)
    state_list = staticmethod(state_list)

    @staticmethod
    def lost_evaluations(client: Any, runs: Any, epochs: int) -> int:
        """Evaluations finished trials should have logged (one dev_f1 per epoch) but did not."""
        lost = 0
        for run in runs:
            steps = {point.step for point in client.get_metric_history(run.info.run_id, "dev_f1")}
            lost += max(0, epochs - len(steps))
        return lost

    def start_process(self, name: str, args: list[str], cwd: Path) -> Process:
        """Any process (a server, a Ray node) in its own process group, with these tests' environment."""
        return start(name, args, self.env, cwd)

    @staticmethod
    def sweep_runs(uri: str, experiment: str) -> tuple[list[Run], list[Run]]:
        """(parent runs, trial runs) of an experiment."""
        client = MlflowClient(uri)
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return [], []
        runs = client.search_runs([found.experiment_id], max_results=1000)
        parents = [run for run in runs if run.data.tags.get(names.ROLE) == names.ROLE_PARENT]
        trials = [run for run in runs if run.data.tags.get(names.ROLE) == names.ROLE_TRIAL]
        return parents, trials

    @staticmethod
    def by_trial(parent: Run, trials: list[Run]) -> dict[str, Run]:
        """Trial id -> its run, checking there is exactly one run per trial, nested under `parent`."""
        for run in trials:
            assert run.data.tags[MLFLOW_PARENT_RUN_ID] == parent.info.run_id
            assert run.data.tags[names.SWEEP_ID] == parent.data.tags[names.SWEEP_ID]
        ids = Counter(run.data.tags[names.TRIAL_ID] for run in trials)
        assert set(ids.values()) <= {1}, f"a trial has several runs: {ids}"
        return {run.data.tags[names.TRIAL_ID]: run for run in trials}


@pytest.fixture(scope="session")
def sweep_tools(ray_env: dict[str, str]) -> SweepTools:
    return SweepTools(ray_env)


# -- fault-injection figures --------------------------------------------------------------------------------

_FIGURES = pytest.StashKey[list[dict[str, Any]]]()
FIGURE_COLUMNS = ("trials finished", "runs duplicated", "evaluations lost", "seconds to recover")


@pytest.fixture
def fault_figure(request: pytest.FixtureRequest) -> Any:
    """`fault_figure(fault, trials_finished=, runs_duplicated=, evaluations_lost=, seconds_to_recover=)`
    records one fault's figures; the table of them is printed at the end of the test session."""

    def record(fault: str, **figures: Any) -> None:
        request.config.stash.setdefault(_FIGURES, []).append({"fault": fault, **figures})

    return record


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    rows = config.stash.get(_FIGURES, [])
    if not rows:
        return
    terminalreporter.section("fault-injection figures")
    header = ("fault", *FIGURE_COLUMNS)
    terminalreporter.write_line(" | ".join(header))
    for row in rows:
        cells = [row["fault"], *(str(row.get(column.replace(" ", "_"), "")) for column in FIGURE_COLUMNS)]
        terminalreporter.write_line(" | ".join(cells))
