"""`dicelab ui`: a real MLflow UI on 127.0.0.1, stopped by its process id."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from tests.ports import free_port

from dicelab.tracking import check_tracking

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_ui_serves_the_store_on_loopback_until_stopped(tmp_path):
    port = free_port()
    check_tracking(
        f"sqlite:///{tmp_path / '.dicelab' / 'mlflow.db'}"
    )  # the default store, created as a trial does
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    process = subprocess.Popen(
        [sys.executable, "-m", "dicelab.cli", "ui", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        first_line = process.stdout.readline()
        assert f"at http://127.0.0.1:{port}" in first_line
        assert f"sqlite:///{tmp_path.resolve()}/.dicelab/mlflow.db" in first_line
        deadline = time.monotonic() + 120  # a cold start on a busy 2-core machine
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert process.poll() is None, "dicelab ui exited"
                assert time.monotonic() < deadline, "the UI did not answer in time"
                time.sleep(0.5)
        experiments = urllib.request.urlopen(
            f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=5", timeout=10
        ).read()
        assert b"experiments" in experiments
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with socket.socket() as probe:
        # SO_REUSEADDR ignores the client side's TIME_WAIT; a live listener would still make bind fail.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))  # the port is free again: the server stopped with the process


def test_a_taken_port_is_a_one_line_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "dicelab.cli", "ui", "--port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
        )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"dicelab ui: error: port {port} on 127.0.0.1 is taken (choose another with --port)"
    )
