"""infra/scripts/local-cluster.sh: `up` starts Ray (head + worker) and MLflow on 127.0.0.1 with token
auth; `down` stops exactly what `up` recorded and leaves no process behind, and nothing else."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from tests.ports import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "infra" / "scripts" / "local-cluster.sh"


@pytest.fixture
def cluster_env(tmp_path) -> dict[str, str]:
    """Settings of a minimal cluster on free ports, in its own state dir (other tests may run Ray too)."""
    return {
        **os.environ,
        "DICELAB_CLUSTER_DIR": str(tmp_path / "cluster"),
        "DICELAB_RAY_PORT": str(free_port()),
        "DICELAB_DASHBOARD_PORT": str(free_port()),
        "DICELAB_MLFLOW_PORT": str(free_port()),
        "DICELAB_WORKERS": "1",
        "DICELAB_HEAD_CPUS": "1",
        "DICELAB_WORKER_CPUS": "1",
        "DICELAB_OBJECT_STORE_MB": "128",
        "DICELAB_PYTHON": sys.executable,
    }


def run(command: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def decoy():
    """A process named like a Ray daemon, in a session of its own: `down` must never touch it."""
    process = subprocess.Popen(["bash", "-c", "exec -a raylet sleep 600"], start_new_session=True)
    yield process
    process.kill()
    process.wait()


def marked_processes(state_dir: str) -> set[tuple[int, float]]:
    """(pid, start time) of every process carrying the cluster's marker in its environment."""
    found = set()
    for process in psutil.process_iter(["pid", "create_time"]):
        try:
            if process.environ().get("DICELAB_LOCAL_CLUSTER") == state_dir:
                found.add((process.info["pid"], process.info["create_time"]))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def alive(pid: int, create_time: float) -> bool:
    try:
        return psutil.Process(pid).create_time() == create_time
    except psutil.NoSuchProcess:
        return False


def test_status_and_down_without_a_cluster(cluster_env):
    status = run("status", cluster_env)
    assert status.returncode == 3 and "down" in status.stdout
    down = run("down", cluster_env)
    assert down.returncode == 0 and "nothing to stop" in down.stdout


def test_up_refuses_a_busy_port_and_starts_nothing(cluster_env):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cluster_env["DICELAB_MLFLOW_PORT"] = str(busy.getsockname()[1])
        up = run("up", cluster_env)
    assert up.returncode == 1
    assert "DICELAB_MLFLOW_PORT" in up.stderr
    assert not (Path(cluster_env["DICELAB_CLUSTER_DIR"]) / "pids").exists()
    assert not marked_processes(cluster_env["DICELAB_CLUSTER_DIR"])


def test_down_leaves_a_reused_pid_alone(cluster_env, decoy):
    # The recorded leader is gone and its pid now belongs to another process (start time differs).
    state_dir = Path(cluster_env["DICELAB_CLUSTER_DIR"])
    state_dir.mkdir(parents=True)
    (state_dir / "pids").write_text(f"ray {decoy.pid} Thu Jan  1 00:00:00 1970\n")
    down = run("down", cluster_env)
    assert down.returncode == 0, down.stderr
    assert "leaving it alone" in down.stdout
    assert decoy.poll() is None
    assert not (state_dir / "pids").exists()


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_failed_up_stops_what_it_started(cluster_env):
    cluster_env["DICELAB_OBJECT_STORE_MB"] = "1"  # below Ray's minimum: the Ray launcher exits at once
    up = run("up", cluster_env, timeout=240)
    assert up.returncode == 1
    assert "ray exited during start-up" in up.stderr
    assert "stopped mlflow" in up.stderr  # started alongside, stopped by the failed `up`
    assert not (Path(cluster_env["DICELAB_CLUSTER_DIR"]) / "pids").exists()
    assert not marked_processes(cluster_env["DICELAB_CLUSTER_DIR"])


JOB = textwrap.dedent(
    """
    import os, sys, time
    from ray.job_submission import JobStatus, JobSubmissionClient
    code = (
        "import os, ray; ray.init(); "
        "print('alive nodes', sum(node['Alive'] for node in ray.nodes())); "
        "print('tracking', os.environ['MLFLOW_TRACKING_URI'])"
    )
    client = JobSubmissionClient()  # RAY_API_SERVER_ADDRESS and the token: from the printed env
    job = client.submit_job(entrypoint=f'python -c "{code}"')
    deadline = time.monotonic() + 240
    while client.get_job_status(job) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
        assert time.monotonic() < deadline, "job did not finish"
        time.sleep(1)
    print(client.get_job_logs(job))
    print("status", client.get_job_status(job))
    """
)


def client_env(env_file: Path) -> dict[str, str]:
    """The environment a user gets from `source <state>/env`."""
    env = dict(os.environ)
    for line in env_file.read_text().splitlines():
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = value
    return env


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_up_runs_jobs_on_loopback_and_down_leaves_no_process(cluster_env, decoy):
    state_dir = cluster_env["DICELAB_CLUSTER_DIR"]
    up = run("up", cluster_env, timeout=420)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        members = marked_processes(state_dir)
        names = [psutil.Process(pid).name() for pid, _ in members]
        assert names.count("raylet") == 2 and "gcs_server" in names, names  # head + 1 worker node

        # Every port of the cluster listens on loopback only.
        for pid, _ in members:
            for conn in psutil.Process(pid).net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    assert conn.laddr.ip in {"127.0.0.1", "::ffff:127.0.0.1"}, (pid, conn)

        status = run("status", cluster_env)
        assert status.returncode == 0, status.stdout
        assert f"http://127.0.0.1:{cluster_env['DICELAB_DASHBOARD_PORT']}" in status.stdout
        assert f"http://127.0.0.1:{cluster_env['DICELAB_MLFLOW_PORT']}" in status.stdout

        # A job submitted with only the printed client env reaches both nodes and the MLflow URI.
        job = subprocess.run(
            [sys.executable, "-c", JOB],
            env=client_env(Path(state_dir) / "env"),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert "status SUCCEEDED" in job.stdout, job.stdout + job.stderr
        assert "alive nodes 2" in job.stdout
        assert f"tracking http://127.0.0.1:{cluster_env['DICELAB_MLFLOW_PORT']}" in job.stdout
        members |= marked_processes(state_dir)  # the job's workers too
    finally:
        down = run("down", cluster_env, timeout=180)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not [member for member in members if alive(*member)]
    assert not marked_processes(state_dir)
    assert decoy.poll() is None, "down killed a process it did not start"
    recorded = json.dumps(sorted(p.name for p in Path(state_dir).iterdir()))
    assert "pids" not in recorded and "auth_token" not in recorded, recorded
