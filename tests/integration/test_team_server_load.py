"""A team's tracking server (PostgreSQL + `mlflow server` with basic auth, started here on 127.0.0.1 and
stopped by process id, leaving no process and no directory), and dicelab against it, on one server and one
set of sweeps for the whole file (a sweep costs its processes: a driver and a trial worker importing torch,
transformers, Tune and MLflow, about 40 CPU-s, so the tests share the sweeps rather than run their own).

Under load and faults: 2 `dicelab sweep` drivers at once into the same experiment, 3 trials each, and a
probe writing a metric every 2 s into an experiment of its own, on one shared local Ray node; mid-sweep
the MLflow server is stopped for a few seconds and PostgreSQL is restarted. Nothing may be lost or
duplicated, and each outage must fall mid-sweep (trials still evaluated after it). The figures (trials
finished, metric points expected vs found, duplicate runs, requests retried, p95 latency of a metric write,
how long writes waited in each outage) are printed and written as JSON to $DICELAB_FIGURES_DIR (default:
the test's temp dir); docs/team-server.md quotes them.

On the sweeps that leaves: `dicelab analyze` over HTTP with the login (its report logged to the newest
parent run through the artifact proxy) and with the database URI (the same report files), `dicelab ui
--experiment` (the sweep's link on the server), and no password in any output (console, files, the
server's logs and database, run params and tags). On the server alone: a wrong password is one line before
Ray starts; metric histories read over HTTP equal those read with SQL.

The size is the smallest that keeps it a load test: two drivers and their trial workers writing into one
experiment at once (where a run could be duplicated), the probe into another, the server with one worker
(it serves this file alone). DICELAB_TEAM_LOAD=full runs the size of issue #26 (4 drivers, two into one
experiment and two into others, 8 trials each: 4 losses x 2 seeds; MLflow down 15 s, PostgreSQL 5 s; the
server with the deployed flags' workers), whose figures docs/team-server.md gives.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient
from mlflow.entities import Metric

from dicelab.analysis import _run_tables
from dicelab.errors import TrackingError
from dicelab.tracking import conventions as names
from dicelab.tracking import team_server

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

BIN = Path(sys.executable).parent
EPOCHS = 1
FULL = os.environ.get("DICELAB_TEAM_LOAD") == "full"
if FULL:  # issue #26's size: 4 losses x 2 seeds = 8 trials per driver, 4 drivers
    LOSSES, SEEDS = ["ce", "dice", "focal", "dsc"], [1, 2]
    DRIVERS = {"a1": "load-shared", "a2": "load-shared", "b": "load-b", "c": "load-c"}
    MAX_CONCURRENT: int | None = None  # Tune's default: as many trials as the node's CPUs allow
else:  # 3 losses x 1 seed = 3 trials per driver, one trial worker each (reused), 2 drivers
    LOSSES, SEEDS = ["ce", "dice", "focal"], [1]
    DRIVERS = {"a1": "load-shared", "a2": "load-shared"}
    MAX_CONCURRENT = 1
# DRIVERS: driver -> experiment; two drivers share one experiment, any others have their own
SHARED = "load-shared"  # the experiment the analysis tests read
TRIALS = len(DRIVERS) * len(LOSSES) * len(SEEDS)
# Evaluated trials (of TRIALS) before each fault: early enough that most trials write after it. At the
# default size, PostgreSQL restarts at the first evaluation after the MLflow outage: the trials' backlog
# after that outage once evaluated the 3 left in one 2-s poll (all 6 done before the restart was over).
MLFLOW_OUTAGE_AFTER = 2 if FULL else 1
POSTGRES_RESTART_AFTER = 10 if FULL else 2
WAIT_POLL_S = 0.5  # how often the faults' triggers count the evaluated trials (a search of a small store)
# How long each is down, besides the MLflow server's start, which adds its own seconds (5 to 25) to its
# outage: the MLflow server issue #26's 15 s at full size; 2 s at the default size. A write waits for the
# client's next retry after the server is back, and the retries come 0, 4, 12, 28 and 60 s after a write's
# first failure (urllib3's back-off at MLflow's factor 2): 15 s plus the restart kept the trials waiting
# until the 28-s or 60-s retry, 2 s plus the restart usually ends before the 12-s one. Either way the writes
# fail and are retried. PostgreSQL a few seconds, enough for the server's connections to meet the restart
# and recover.
MLFLOW_OUTAGE_S = 15 if FULL else 2
POSTGRES_OUTAGE_S = 5 if FULL else 2
PROBE_EVERY_S = 0.5 if FULL else 2.0  # a few hundred writes at least: enough for a p95
RETRY_LINE = re.compile(r"Retrying \(")
# MLflow's workers: the deployed flags' at full size (the docs' figures); one for the default size
SERVER_WORKERS = None if FULL else 1


@dataclass
class TeamServerUnderTest:
    server: team_server.TeamServer
    username: str
    password: str
    ray_env: dict[str, str] = field(repr=False)  # the integration tests' base environment (conftest)

    @property
    def uri(self) -> str:
        return self.server.tracking_uri

    @property
    def login(self) -> dict[str, str]:
        return {"MLFLOW_TRACKING_USERNAME": self.username, "MLFLOW_TRACKING_PASSWORD": self.password}

    def env(self, **extra: str) -> dict[str, str]:
        """A client's environment: this server, its login, libpq's password file for the database URI."""
        return {**self.ray_env, **self.server.client_environment(), **self.login, **extra}


@pytest.fixture(scope="module")
def server(ray_env: dict[str, str]) -> Iterator[TeamServerUnderTest]:
    """The file's team server; this process's MLflow client has its login and PGPASSFILE meanwhile."""
    try:
        team_server.postgres_bin()
    except TrackingError as error:
        pytest.fail(str(error), pytrace=False)
    directory = Path(tempfile.mkdtemp(prefix="dl-tsl-", dir="/tmp"))  # reachable by PostgreSQL's account
    admin = ("admin", secrets.token_urlsafe(18))
    with (
        team_server.running(directory, admin, workers=SERVER_WORKERS) as running,
        pytest.MonkeyPatch.context() as patch,
    ):
        under_test = TeamServerUnderTest(running, *admin, ray_env=ray_env)
        for key, value in {**under_test.login, "PGPASSFILE": str(running.pgpass)}.items():
            patch.setenv(key, value)
        yield under_test
    assert not directory.exists()


def _dicelab(
    args: list[str], cwd: Path, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dicelab.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def _config(directory: Path, name: str) -> Path:
    path = directory / f"{name}.yaml"
    config = {
        "name": name,
        "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 32, "n_dev": 16}, "max_length": 32},
        "model": {"backbone": "tiny-bert"},
        "train": {"epochs": EPOCHS, "batch_size": 16},
        "tracking": {"log_predictions": False},
        "search": {"seeds": SEEDS, "space": {"loss.name": {"grid": LOSSES}}, "resources": {"cpu": 1}},
    }
    if MAX_CONCURRENT is not None:  # one trial worker per driver, reused by its trials
        config["search"]["max_concurrent"] = MAX_CONCURRENT
    path.write_text(yaml.safe_dump(config))
    return path


# `ray start` gives up when its processes come up too slowly for its fixed waits ("timed out during
# startup"), which a loaded 2-core machine can exceed: the node is started once more, as the driver does.
RAY_HEAD_STARTS = 2


def _ray_head(directory: Path, env: dict[str, str], sweep_tools: Any) -> tuple[subprocess.Popen, str]:
    """One Ray node (2 CPUs) on 127.0.0.1 that the drivers share; its workers get the MLflow login from the
    node's environment, as a team cluster's nodes get it from their secrets."""
    for attempt in range(1, RAY_HEAD_STARTS + 1):
        free = sweep_tools.free_port
        port = free()
        args = [
            str(BIN / "ray"),
            "start",
            "--head",
            f"--port={port}",
            "--include-dashboard=false",
            f"--ray-client-server-port={free()}",
            f"--temp-dir={directory / f'ray{attempt}'}",
            "--num-cpus=2",
            "--block",
            "--disable-usage-stats",
            "--node-ip-address=127.0.0.1",
            f"--node-manager-port={free()}",
            f"--object-manager-port={free()}",
            f"--dashboard-agent-listen-port={free()}",
            f"--dashboard-agent-grpc-port={free()}",
            f"--runtime-env-agent-port={free()}",
            f"--metrics-export-port={free()}",
            "--min-worker-port=0",
            "--max-worker-port=0",
        ]
        log = directory / f"ray-head-{attempt}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                args, env=env, cwd=directory, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            sweep_tools.wait_until(functools.partial(_head_started, log, popen), 300, "Ray")
        except BaseException:
            _stop_group(popen)
            raise
        if popen.poll() is None:
            return popen, f"127.0.0.1:{port}"
        _stop_group(popen)  # whatever of its node is left
        if b"timed out during startup" not in log.read_bytes() or attempt == RAY_HEAD_STARTS:
            raise AssertionError(f"ray start failed:\n{log.read_text()[-3000:]}")
    raise AssertionError("unreachable")


def _head_started(log: Path, popen: subprocess.Popen) -> bool:
    """Whether `ray start` is done: its node runs, or it exited."""
    return b"Ray runtime started" in log.read_bytes() or popen.poll() is not None


def _stop_group(popen: subprocess.Popen) -> None:
    """SIGTERM `ray start --block` alone (it drains and stops its node; a SIGTERM to its whole group would
    stop the GCS under it, and its drain would wait out 30 s), then SIGKILL to whatever is left of the group
    (after 60 s, or at once when its leader had already exited)."""
    if popen.poll() is None:
        os.kill(popen.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):  # no member left
        os.killpg(popen.pid, signal.SIGKILL)
    popen.wait()


class MetricProbe(threading.Thread):
    """Logs one metric every PROBE_EVERY_S to a run of its own, through the same client and retries as the
    trials, and records (issued at, seconds the write took)."""

    def __init__(self, uri: str) -> None:
        super().__init__(daemon=True)
        self.client = MlflowClient(uri)
        experiment = self.client.create_experiment(f"probe-{secrets.token_hex(3)}")
        self.run_id = self.client.create_run(experiment).info.run_id
        self.writes: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        step = 0
        while not self.stop.is_set():
            issued = time.time()
            self.client.log_metric(self.run_id, "probe", step, step=step)
            self.writes.append((issued, time.time() - issued))
            step += 1
            self.stop.wait(PROBE_EVERY_S)


def _wait_for(predicate: Any, timeout_s: float, what: str, drivers: dict[str, subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        failed = {name: p.returncode for name, p in drivers.items() if p.poll() not in (None, 0)}
        assert not failed, f"drivers failed while waiting for {what}: {failed}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(WAIT_POLL_S)


@dataclass
class Load:
    """What the load scenario left: the figures, the drivers' logs and directories."""

    figures: dict[str, Any]
    logs: dict[str, Path]
    directory: Path


@pytest.fixture(scope="module")
def load(server, sweep_tools, ray_env, tmp_path_factory) -> Load:
    """The drivers at once, the probe, the MLflow server stopped and PostgreSQL restarted mid-sweep; every
    driver must end well (the sweeps are what the later tests read)."""
    team = server.server
    uri = team.tracking_uri
    tmp_path = tmp_path_factory.mktemp("load")
    env = {**ray_env, **server.login, "MLFLOW_TRACKING_URI": uri}
    ray_dir = Path(tempfile.mkdtemp(prefix="dl-r-", dir="/tmp"))  # short: Ray's socket paths (107 characters)
    try:
        head, address = _ray_head(ray_dir, env, sweep_tools)
    except BaseException:
        shutil.rmtree(ray_dir, ignore_errors=True)
        raise
    logs: dict[str, Path] = {}
    drivers: dict[str, subprocess.Popen] = {}
    probe = MetricProbe(uri)
    outages: dict[str, tuple[float, float]] = {}
    evaluated_at_end: dict[str, int] = {}  # fault -> trials evaluated when it was over
    try:
        probe.start()
        started = time.time()
        for driver, experiment in DRIVERS.items():
            directory = tmp_path / driver
            directory.mkdir()
            logs[driver] = directory / "driver.log"
            # `--address auto` with RAY_ADDRESS: the drivers join the node as processes on the cluster's own
            # machine do, and the trials import the installed dicelab (HOST:PORT would ship the package to
            # the workers in a runtime env, about 10 CPU-s more per driver; the cluster tests do that).
            args = ["sweep", str(_config(directory, experiment)), "--address", "auto", "--tracking-uri", uri]
            with logs[driver].open("wb") as out:
                drivers[driver] = subprocess.Popen(
                    [str(BIN / "dicelab"), *args],
                    env={**env, "RAY_ADDRESS": address},
                    cwd=directory,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        client = MlflowClient(uri)

        def evaluated_trials() -> int:
            runs = client.search_runs(
                [e.experiment_id for e in client.search_experiments() if e.name.startswith("load-")],
                filter_string="metrics.dev_f1 >= 0",
            )
            return len(runs)

        # Fault 1: the MLflow server down for MLFLOW_OUTAGE_S once trials have started evaluating.
        _wait_for(lambda: evaluated_trials() >= MLFLOW_OUTAGE_AFTER, 900, "the first evaluations", drivers)
        down = time.time()
        team.stop_mlflow()
        time.sleep(MLFLOW_OUTAGE_S)
        team.start_mlflow()
        outages["mlflow"] = (down, time.time())
        evaluated_at_end["mlflow"] = evaluated_trials()
        # Fault 2: PostgreSQL restarted (fast shutdown: open transactions roll back) while trials still write.
        _wait_for(lambda: evaluated_trials() >= POSTGRES_RESTART_AFTER, 900, "more evaluations", drivers)
        down = time.time()
        team.stop_postgres()
        time.sleep(POSTGRES_OUTAGE_S)
        team.start_postgres()
        outages["postgres"] = (down, time.time())
        evaluated_at_end["postgres"] = evaluated_trials()
        for name, popen in drivers.items():
            assert popen.wait(timeout=1200) == 0, f"driver {name}: {logs[name].read_text()[-4000:]}"
        wall_s = time.time() - started
    finally:
        probe.stop.set()
        for popen in drivers.values():
            if popen.poll() is None:
                os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()
        _stop_group(head)
        shutil.rmtree(ray_dir, ignore_errors=True)
    probe.join(timeout=300)

    figures = _figures(MlflowClient(uri), logs, team, probe, outages, wall_s)
    figures["trials_evaluated_after_outage"] = evaluated_at_end
    print("\nteam server under load and faults:", json.dumps(figures, indent=2))
    out = Path(os.environ.get("DICELAB_FIGURES_DIR", tmp_path)) / "team_server_load.json"
    out.write_text(json.dumps(figures, indent=2))
    return Load(figures, logs, tmp_path)


def test_drivers_at_once_with_server_and_database_restarts(server, load):
    figures = load.figures
    assert figures["trials_finished"] == figures["trials_expected"] == TRIALS
    # Both outages fell mid-sweep: trials were still to evaluate (and write) after each was over.
    evaluated_at_end = figures["trials_evaluated_after_outage"]
    assert set(evaluated_at_end) == {"mlflow", "postgres"}
    assert all(count < TRIALS for count in evaluated_at_end.values()), evaluated_at_end
    assert figures["metric_points_found"] == figures["metric_points_expected"]
    assert figures["duplicate_runs"] == 0
    assert figures["parent_runs"] == len(DRIVERS)
    assert server.password not in "".join(path.read_text() for path in load.logs.values())


def _figures(
    client: MlflowClient,
    logs: dict[str, Path],
    team: team_server.TeamServer,
    probe: MetricProbe,
    outages: dict[str, tuple[float, float]],
    wall_s: float,
) -> dict[str, Any]:
    experiments = [client.get_experiment_by_name(name) for name in sorted(set(DRIVERS.values()))]
    runs = client.search_runs([e.experiment_id for e in experiments], max_results=5000)
    trials = [run for run in runs if run.data.tags.get(names.ROLE) == names.ROLE_TRIAL]
    parents = [run for run in runs if run.data.tags.get(names.ROLE) == names.ROLE_PARENT]
    keys = Counter((run.data.tags[names.SWEEP_ID], run.data.tags[names.TRIAL_ID]) for run in trials)
    finished = [run for run in trials if run.info.status == "FINISHED"]
    # Every evaluation logs dev_f1 and every epoch train_loss: one point per epoch each, per trial.
    found = 0
    for run in finished:
        for key in ("dev_f1", names.TRAIN_LOSS):
            found += len({point.step for point in client.get_metric_history(run.info.run_id, key)})
    server_log = (team.logs / "mlflow.log").read_text()

    def outside(issued: float) -> bool:
        return not any(start - 1 <= issued <= end for start, end in outages.values())

    normal = [seconds for issued, seconds in probe.writes if outside(issued)]
    waited = {
        fault: round(max((s for issued, s in probe.writes if start - 1 <= issued <= end), default=0.0), 1)
        for fault, (start, end) in outages.items()
    }
    return {
        "drivers": len(DRIVERS),
        "trials_expected": TRIALS,
        "trials_finished": len(finished),
        "parent_runs": len(parents),
        "metric_points_expected": TRIALS * EPOCHS * 2,
        "metric_points_found": found,
        "duplicate_runs": sum(count - 1 for count in keys.values()),
        "client_retries_logged": sum(len(RETRY_LINE.findall(path.read_text())) for path in logs.values()),
        "server_5xx_responses": len(re.findall(r'HTTP/1\.1" 5\d\d', server_log)),
        "metric_writes_probed": len(probe.writes),
        "metric_write_p50_ms": round(1000 * float(np.percentile(normal, 50)), 1),
        "metric_write_p95_ms": round(1000 * float(np.percentile(normal, 95)), 1),
        "outage_s": {fault: round(end - start, 1) for fault, (start, end) in outages.items()},
        "longest_write_wait_s": waited,
        "wall_s": round(wall_s, 1),
    }


# -- dicelab on the sweeps the load left -------------------------------------------------------------------


@pytest.fixture(scope="module")
def analyzed(server, load, sweep_tools, tmp_path_factory) -> tuple[Path, list[subprocess.CompletedProcess]]:
    """`dicelab analyze` of the shared experiment over HTTP with the login (the report is logged back):
    (its directory, the outputs of every command run here on the sweeps)."""
    directory = tmp_path_factory.mktemp("analysis")
    args = ["analyze", "--experiment", SHARED, "--tracking-uri", server.uri]
    done = sweep_tools.run_here(args, directory)  # with the login: the server fixture's environment
    assert done.returncode == 0, done.stderr[-3000:]
    return directory, [done]


def test_sweep_and_analysis_over_http_with_login(server, analyzed):
    client = MlflowClient(server.uri)  # with the login (the server fixture's environment)
    experiment = client.get_experiment_by_name(SHARED)
    runs = client.search_runs([experiment.experiment_id])
    parents = [run for run in runs if run.data.tags.get(names.ROLE) == names.ROLE_PARENT]
    trials = [run for run in runs if run.data.tags.get(names.ROLE) == names.ROLE_TRIAL]
    sweeps = sum(name == SHARED for name in DRIVERS.values())
    assert len(parents) == sweeps and len(trials) == sweeps * len(LOSSES) * len(SEEDS)
    assert all(run.info.status == "FINISHED" for run in trials)
    # The report went through the artifact proxy (mlflow-artifacts:/), into the server's directory, on the
    # parent run of the sweep it judged (the newest of the two).
    assert experiment.artifact_location.startswith("mlflow-artifacts:")
    reported = [run for run in parents if client.list_artifacts(run.info.run_id, names.REPORT_DIR)]
    assert len(reported) == 1, "the report is not on one parent run"
    stored = list(server.server.artifacts.rglob("*"))
    assert any(names.REPORT_DIR in path.parts for path in stored), stored[:20]


def test_analysis_with_the_database_uri_reads_the_same_trials(server, analyzed, sweep_tools):
    directory, _ = analyzed
    # The password comes from libpq's PGPASSFILE (the server fixture's environment), never from the URI.
    out = directory / "db-report"
    args = ["analyze", "--experiment", SHARED, "--tracking-uri", server.server.database_uri]
    done = sweep_tools.run_here([*args, "--out", str(out), "--no-log"], directory)
    assert done.returncode == 0, done.stderr[-3000:]
    http_report = directory / ".dicelab" / "reports" / SHARED
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in http_report.iterdir())


def test_ui_links_to_the_sweep_on_the_server(server, analyzed, sweep_tools):
    directory, outputs = analyzed
    done = sweep_tools.run_here(["ui", "--experiment", SHARED, "--tracking-uri", server.uri], directory)
    outputs.append(done)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"sweep {SHARED!r}: {server.uri}/#/experiments/" in done.stdout


def test_no_password_in_any_output(server, load, analyzed):
    """Every output of the sweeps, the analyses and the UI (console, drivers' logs, report files, run params
    and tags, the server's logs, artifacts and database files) is free of the MLflow password and
    PostgreSQL's password."""
    directory, outputs = analyzed
    team = server.server
    pg_password = team.pgpass.read_text().strip().rsplit(":", 1)[1]
    secrets_ = [server.password.encode(), pg_password.encode()]
    for done in outputs:
        for secret in secrets_:
            assert secret.decode() not in done.stdout + done.stderr, done.args
    places = (directory, load.directory, team.directory)
    files = [p for place in places for p in place.rglob("*") if p.is_file() and p != team.pgpass]
    assert len(files) > 20
    for path in files:
        content = path.read_bytes()
        for secret in secrets_:
            assert secret not in content, path
    client = MlflowClient(server.uri)
    experiments = [client.get_experiment_by_name(name) for name in sorted(set(DRIVERS.values()))]
    for run in client.search_runs([e.experiment_id for e in experiments], max_results=5000):
        recorded = str(run.data.params) + str(run.data.tags)
        assert server.password not in recorded and pg_password not in recorded


# -- the server alone --------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["sweep", "analyze"])
def test_a_wrong_password_is_one_line_before_ray_starts(server, tmp_path, command):
    args = {
        "sweep": ["sweep", str(_config(tmp_path, "team-tiny"))],
        "analyze": ["analyze", "--experiment", SHARED],
    }[command]
    started = time.monotonic()
    wrong = "not-" + server.password
    done = _dicelab(
        [*args, "--tracking-uri", server.uri], tmp_path, server.env(MLFLOW_TRACKING_PASSWORD=wrong), 120
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0] == (
        f"dicelab {command}: error: MLflow server {server.uri} refused the login (HTTP 401): set "
        "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or ~/.mlflow/credentials) to an account of "
        "that server"
    )
    assert wrong not in done.stdout + done.stderr
    assert time.monotonic() - started < 60
    assert not (tmp_path / ".dicelab").exists()  # nothing started, nothing written


def test_histories_over_http_equal_the_database_s(server, monkeypatch):
    """Metric histories read through MLflow's client from the server over HTTP (with its login) equal those
    read through the client from its PostgreSQL database: values, steps, NaN, infinity."""
    client = MlflowClient(server.uri)  # with the login and PGPASSFILE (the server fixture's environment)
    experiment_id = client.create_experiment(f"histories-{time.time_ns()}")
    values = [[0.5, 0.6, 0.7], [math.nan, 0.2, math.inf], [0.9], []]
    run_ids = []
    for history in values:
        run_id = client.create_run(experiment_id).info.run_id
        now = int(time.time() * 1000)
        metrics = [Metric("dev_f1", value, now + step, step) for step, value in enumerate(history, 1)]
        client.log_batch(run_id, metrics=[*metrics, Metric("dev_loss", 1.0, now, 1)])
        run_ids.append(run_id)
    monkeypatch.setattr(_run_tables, "HISTORY_READERS", 3)  # more runs than readers

    over_http = _run_tables.read_histories(server.uri, run_ids, "dev_f1")
    from_sql = _run_tables.read_histories(server.server.database_uri, run_ids, "dev_f1")

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(["run_id", "step"], ignore_index=True)

    pd.testing.assert_frame_equal(ordered(over_http), ordered(from_sql), check_dtype=False)
    assert len(over_http) == 7 and over_http["value"].isna().sum() == 1
    # MLflow's SQL store keeps infinity as the largest float
    assert over_http["value"].max() == sys.float_info.max
