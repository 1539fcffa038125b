"""The preflight against a real two-node Ray cluster on 127.0.0.1 (token authentication): the versions it
reports through its GCS (`dicelab sweep --address`) and its dashboard (`dicelab submit`) are the driver's; a
driver of another version gets one line naming both; a wrong token is one line, exit 2, before anything is
logged."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from dicelab.sweeps import ray_adapter
from dicelab.sweeps.ray_adapter import ClusterMismatch, Versions

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster_env(ray_env, monkeypatch):
    """This process as a driver of the cluster: its token (the GCS client reads it when created)."""
    for key in [key for key in os.environ if key.startswith("RAY_")]:
        monkeypatch.delenv(key)
    for key, value in ray_env.items():
        if key.startswith("RAY_"):
            monkeypatch.setenv(key, value)
    return ray_env


def test_the_cluster_reports_the_drivers_versions_and_another_driver_gets_one_line(ray_cluster, cluster_env):
    driver = ray_adapter.driver_versions()
    reported = ray_adapter.cluster_versions(ray_cluster.address)
    assert reported == driver
    ray_adapter.check_cluster(ray_cluster.address)  # the same versions: no error

    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(ray_cluster.dashboard)
    assert ray_adapter.dashboard_versions(client, ray_cluster.dashboard) == driver
    ray_adapter.check_dashboard(client, ray_cluster.dashboard)

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
