"""benchmarks/cputree.py: the CPU of a command and of what it starts, a daemonised grandchild included (as
`ray start` leaves its raylet), and the command's exit code passed on."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cputree.py"
# Each process idles a second after spinning: the tool samples every 0.25 s, so the spin's last CPU is seen
# before the process ends even on a loaded machine (what a process burns in its last 0.25 s can be missed).
SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\ntime.sleep(1)\n"
# The command spins 0.6 CPU-s and starts a child in a session of its own (as `ray start`'s daemons are)
# that spins 0.8: a walk of the command's process group or session would miss the child, the tag does not.
COMMAND = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {SPIN.format(s=0.8)!r}], start_new_session=True)
exec({SPIN.format(s=0.6)!r})
child.wait()
sys.exit(3)
"""


def test_it_counts_a_detached_grandchild_and_passes_the_exit_code_on():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), sys.executable, "-c", COMMAND],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    total = float(re.search(r"CPUTREE cpu=([\d.]+) wall=[\d.]+ rc=3", done.stderr).group(1))
    assert 1.4 <= total <= 4.0, done.stderr  # 0.6 + 0.8 spun, plus two interpreters' start-up
    assert done.stderr.count(sys.executable) >= 2, done.stderr  # both processes listed
    assert re.search(r"\n +[\d.]+ +2  other\n", done.stderr), done.stderr  # both: plain `python -c`


def test_processes_are_grouped_by_what_they_are():
    spec = importlib.util.spec_from_file_location("cputree", SCRIPT)
    assert spec is not None and spec.loader is not None
    cputree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cputree)
    site = "/home/u/project/.venv/lib/python3.11/site-packages"
    worker = f"/v/bin/python {site}/ray/_private/workers/default_worker.py --node-ip-address=127.0.0.1"
    assert cputree.kind(worker) == "Ray worker"
    for daemon in (
        f"/v/bin/python -u {site}/ray/dashboard/agent.py --node-id=1",
        f"/v/bin/python -u {site}/ray/autoscaler/_private/monitor.py --logs-dir=/tmp",
        f"{site}/ray/core/src/ray/raylet/raylet --raylet_socket_name=/tmp/s",
        "/v/bin/python /v/bin/ray start --head --block --port 6379",
    ):
        assert cputree.kind(daemon) == "Ray daemon", daemon
    assert cputree.kind("/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))") == (
        "pytest-xdist worker"
    )
    assert cputree.kind("/v/bin/python /v/bin/dicelab sweep /tmp/x/it-asha.yaml") == "dicelab command"
    assert cputree.kind("/v/bin/python -m dicelab.cli validate ok.yaml") == "dicelab command"
    assert cputree.kind("/v/bin/python -m mlflow server --host 127.0.0.1 --port 5000") == "MLflow server"
    assert cputree.kind("/v/bin/python -m uvicorn --log-config x mlflow.server.fastapi_app:app") == (
        "MLflow server"
    )
    assert cputree.kind("/usr/lib/postgresql/15/bin/postgres -D /tmp/pg") == "PostgreSQL"
    assert cputree.kind("/v/bin/python -c print(1)") == "other"


def test_without_a_command_it_says_how_to_use_it():
    for args in ([], ["--help"]):  # an option is not a command: it would fail to start
        done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        assert done.stderr == "usage: python benchmarks/cputree.py COMMAND [ARG ...]\n"


def test_a_command_that_cannot_run_is_one_line_exit_2():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "no-such-command-here"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == "cputree: cannot run 'no-such-command-here': No such file or directory\n"
