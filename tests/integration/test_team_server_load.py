"""A team's server under load and faults: 2 `dicelab sweep` drivers at once into the same experiment, 3 trials
each, and a probe writing a metric every second into an experiment of its own, on one shared local Ray node,
against PostgreSQL + `mlflow server` with basic auth; mid-sweep the MLflow server is stopped for 15 s and
PostgreSQL is restarted. Nothing may be lost or duplicated, and each outage must fall mid-sweep (trials
still evaluated after it). The figures (trials finished, metric points expected vs found, duplicate runs,
requests retried, p95 latency of a metric write, how long writes waited in each outage) are printed and
written as JSON to $DICELAB_FIGURES_DIR (default: the test's temp dir); docs/team-server.md quotes them.

The size is the smallest that keeps it a load test: two drivers and their trial workers writing into one
experiment at once (where a run could be duplicated), the probe into another. Each driver and its trial
worker import torch, transformers, Tune and MLflow (about 40 CPU-s a driver), so `make test` runs 2 x 3.
DICELAB_TEAM_LOAD=full runs the size of issue #26 (4 drivers, two into one experiment and two into
others, 8 trials each: 4 losses x 2 seeds), whose figures docs/team-server.md gives.
"""

from __future__ import annotations

import json
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
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from mlflow import MlflowClient

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
TRIALS = len(DRIVERS) * len(LOSSES) * len(SEEDS)
# Evaluated trials (of TRIALS) before each fault: early enough that most trials write after it.
MLFLOW_OUTAGE_AFTER = 2 if FULL else 1
POSTGRES_RESTART_AFTER = 10 if FULL else 3
MLFLOW_OUTAGE_S = 15
POSTGRES_OUTAGE_S = 5
PROBE_EVERY_S = 0.5 if FULL else 1.0  # a few hundred writes at least: enough for a p95
RETRY_LINE = re.compile(r"Retrying \(")


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[team_server.TeamServer, dict[str, str]]]:
    try:
        team_server.postgres_bin()
    except TrackingError as error:
        pytest.fail(str(error), pytrace=False)
    directory = Path(tempfile.mkdtemp(prefix="dl-tsl-", dir="/tmp"))
    admin = ("admin", secrets.token_urlsafe(18))
    with team_server.running(directory, admin) as running:
        yield running, {"MLFLOW_TRACKING_USERNAME": admin[0], "MLFLOW_TRACKING_PASSWORD": admin[1]}
    assert not directory.exists()


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


def _ray_head(directory: Path, env: dict[str, str], sweep_tools: Any) -> tuple[subprocess.Popen, str]:
    """One Ray node (2 CPUs) on 127.0.0.1 that the drivers share; its workers get the MLflow login from the
    node's environment, as a team cluster's nodes get it from their secrets."""
    free = sweep_tools.free_port
    port = free()
    args = [
        str(BIN / "ray"),
        "start",
        "--head",
        f"--port={port}",
        "--include-dashboard=false",
        f"--ray-client-server-port={free()}",
        f"--temp-dir={directory / 'ray'}",
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
    log = directory / "ray-head.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            args, env=env, cwd=directory, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        sweep_tools.wait_until(
            lambda: b"Ray runtime started" in log.read_bytes() or popen.poll() is not None, 300, "Ray"
        )
        assert popen.poll() is None, log.read_text()[-3000:]
    except BaseException:
        _stop_group(popen)
        raise
    return popen, f"127.0.0.1:{port}"


def _stop_group(popen: subprocess.Popen) -> None:
    """SIGTERM the process group led by `popen` (`ray start --block` stops its node), SIGKILL after 60 s."""
    if popen.poll() is None:
        os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
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
        time.sleep(2)


def test_drivers_at_once_with_server_and_database_restarts(
    server, sweep_tools, ray_env, tmp_path, monkeypatch
):
    team, login = server
    for key, value in login.items():  # this process's client: the probe and the checks
        monkeypatch.setenv(key, value)
    uri = team.tracking_uri
    env = {**ray_env, **login, "MLFLOW_TRACKING_URI": uri}
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
            args = ["sweep", str(_config(directory, experiment)), "--address", address, "--tracking-uri", uri]
            with logs[driver].open("wb") as out:
                drivers[driver] = subprocess.Popen(
                    [str(BIN / "dicelab"), *args],
                    env=env,
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

    assert figures["trials_finished"] == figures["trials_expected"] == TRIALS
    # Both outages fell mid-sweep: trials were still to evaluate (and write) after each was over.
    assert all(count < TRIALS for count in evaluated_at_end.values()), evaluated_at_end
    assert figures["metric_points_found"] == figures["metric_points_expected"]
    assert figures["duplicate_runs"] == 0
    assert figures["parent_runs"] == len(DRIVERS)
    assert login["MLFLOW_TRACKING_PASSWORD"] not in "".join(path.read_text() for path in logs.values())


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
