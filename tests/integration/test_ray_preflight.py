"""The preflight against a real two-node Ray cluster on 127.0.0.1 (token authentication): the versions it
reports through its GCS (`dicelab sweep --address`) and its dashboard (`dicelab submit`) are the driver's; a
driver of another version gets one line naming both; a wrong token is one line, exit 2, before anything is
logged."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from dicelab.sweeps import ray_adapter
from dicelab.sweeps.ray_adapter import ClusterMismatch, Versions

pytestmark = pytest.mark.integration


# Ray's C++ client reads the token once per process, so the driver's side runs in a fresh process of its own
# (this test process may already have met another cluster's token in an earlier test of its worker).
DRIVER = """
import json, sys
from ray.job_submission import JobSubmissionClient
from dicelab.sweeps import ray_adapter
address, dashboard = sys.argv[1:3]
reported = ray_adapter.cluster_versions(address)
ray_adapter.check_cluster(address)  # the same versions: no error
client = JobSubmissionClient(dashboard)
board = ray_adapter.dashboard_versions(client, dashboard)
ray_adapter.check_dashboard(client, dashboard)
driver = ray_adapter.driver_versions()
print(json.dumps([[v.ray, v.python] for v in (driver, reported, board)]))
"""


def test_the_cluster_reports_the_drivers_versions_and_another_driver_gets_one_line(ray_cluster, ray_env):
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update({key: value for key, value in ray_env.items() if key.startswith("RAY_")})
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, ray_cluster.address, ray_cluster.dashboard],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    driver, reported, board = (Versions(*found) for found in json.loads(done.stdout.strip().splitlines()[-1]))
    assert reported == driver == board
    assert driver == ray_adapter.driver_versions()

    # a driver of the next Ray release, and one on another Python, against what the cluster reported
    where = f"--address {ray_cluster.address}"
    newer = Versions("2.61.0", reported.python)
    line = ray_adapter.version_mismatch(reported, newer, where)
    assert line is not None and "\n" not in line
    assert line.startswith(
        f"{where}: the cluster runs Ray {reported.ray} on Python {reported.python}, "
        f"this driver Ray 2.61.0 on Python {reported.python}:"
    )
    other_python = Versions(reported.ray, "3.99.0")
    assert f"this driver Ray {reported.ray} on Python 3.99.0" in str(
        ray_adapter.version_mismatch(reported, other_python, where)
    )
    assert ClusterMismatch(line).exit_code == 2


def test_a_wrong_token_is_one_line_exit_2_and_nothing_is_logged(ray_cluster, sweep_tools, tmp_path: Path):
    config = sweep_tools.write_sweep(tmp_path, "preflight", {"space": {"loss.name": {"grid": ["ce"]}}})
    wrong = tmp_path / "wrong_token"
    wrong.write_text(secrets.token_hex(32))
    env = {**sweep_tools.env, "RAY_AUTH_TOKEN_PATH": str(wrong)}
    store = tmp_path / "mlflow.db"
    done = sweep_tools.run(
        ["sweep", str(config), "--address", ray_cluster.address, "--tracking-uri", f"sqlite:///{store}"],
        tmp_path,
        timeout_s=180,
        env=env,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "token" in lines[0] and ray_cluster.address in lines[0], done.stderr
    assert not store.exists()  # nothing logged: not even the store was created

    submitted = sweep_tools.run(
        ["submit", str(config), "--address", ray_cluster.dashboard, "--no-tracking-check"],
        tmp_path,
        timeout_s=180,
        env=env,
    )
    assert submitted.returncode == 2, submitted.stdout + submitted.stderr
    lines = [line for line in submitted.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "token" in lines[0], submitted.stderr
