"""Every command that talks to a tracking server checks it first: an unreachable server is one line, at once.

Before the check, `dicelab analyze` against a port nothing listens on spent 250 s in the MLflow client's
retries. The limit below leaves room for the commands' imports on a busy 2-core machine; the retries alone
would take minutes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

# integration: it runs `dicelab sweep`, `submit` and `ui`, which start Ray or a server unless they fail first
pytestmark = [pytest.mark.slow, pytest.mark.integration]

FAST_S = 45.0


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the block ends: nothing listens there


def _sweep_config(directory: Path) -> Path:
    path = directory / "tiny.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "tiny",
                "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 32, "n_dev": 16}},
                "model": {"backbone": "tiny-bert"},
                "search": {"algorithm": "grid", "seeds": [1]},
            }
        )
    )
    return path


@pytest.mark.parametrize("command", ["analyze", "sweep", "sweep --resume", "submit", "ui"])
def test_an_unreachable_server_is_one_line_within_seconds(command, tmp_path):
    uri = f"http://127.0.0.1:{_closed_port()}"
    config = str(_sweep_config(tmp_path))
    args = {
        "analyze": ["analyze", "--experiment", "tiny"],
        "sweep": ["sweep", config],
        "sweep --resume": ["sweep", config, "--resume"],
        "submit": ["submit", config, "--address", "http://127.0.0.1:1"],
        "ui": ["ui"],
    }[command]
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "RAY_"))}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dicelab.cli", *args, "--tracking-uri", uri],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"dicelab {args[0]}: error: MLflow server {uri} is unreachable"), lines[0]
    assert seconds < FAST_S, f"{command}: {seconds:.1f} s"
    assert not (tmp_path / ".dicelab").exists()  # nothing started, nothing written
