"""A private local Ray that does not outlive its driver.

When a `dicelab sweep` driver dies without shutting Ray down (kill -9, OOM killer), Ray's GCS and raylet go
with it, but the raylet's agents (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`) stay alive indefinitely. So
the driver writes a record into its Ray session directory (its pid and its cluster's node id) and starts a
small watchdog in a session of its own: when the driver dies, the watchdog kills the processes of that node
and nothing else. A process belongs to the node when its environment carries the node's RAY_NODE_ID (Ray sets
it in every process the raylet starts) or it is one of the pids recorded at start-up with the same start time:
another cluster on the machine, even another dicelab's, is never touched, and no process is found by name.
If the watchdog was killed too, the next local sweep reaps what the record names. The processes are read
through psutil (their start times, children and environments).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

# v2: start times are psutil's (seconds since the epoch); a record of another form is left alone
RECORD_NAME = "dicelab_driver.v2.json"
POLL_S = 1.0


def start_time(pid: int) -> float | None:
    """The process's start time (with the pid, an identity that survives the pid's reuse); None if gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _descendants(pid: int) -> list[int]:
    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _node_processes(marker_text: str) -> list[int]:
    """Processes whose environment holds `marker_text` ("RAY_NODE_ID=<id>": they belong to that Ray node)."""
    name, _, value = marker_text.partition("=")
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error, OSError):  # gone meanwhile, or another user's
            if process.environ().get(name) == value:
                found.append(process.pid)
    return found


_recorded: list[Path] = []  # this driver's record, until `release`


def record(session_dir: Path, node_id: str) -> None:
    """After ray.init of a private local cluster: record it and start its watchdog."""
    from dicelab.sweeps.ray_adapter import NODE_ID_ENV  # in the driver: the watchdog imports nothing

    driver = os.getpid()
    path = session_dir / RECORD_NAME
    data = {
        "driver_pid": driver,
        "driver_start": start_time(driver),
        "node_id": node_id,
        "node_marker": f"{NODE_ID_ENV}={node_id}",  # in the environment of every process of the node
        "processes": [[pid, start_time(pid)] for pid in _descendants(driver)],
    }
    path.write_text(json.dumps(data))
    subprocess.Popen(  # this file as a script: the stdlib and psutil, no dicelab or Ray imports to pay for
        [sys.executable, __file__, str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # survives a kill of the driver's process group; never gets its Ctrl-C
        close_fds=True,
    )
    _recorded.append(path)


def release() -> None:
    """After ray.shutdown(): nothing to reap; the watchdog sees the record gone and exits."""
    while _recorded:
        _recorded.pop().unlink(missing_ok=True)


def _alive(pid: int, started: float | None) -> bool:
    return started is not None and start_time(pid) == started


def reap(path: Path) -> list[int]:
    """Kill what is left of the recorded cluster once its driver is gone; the pids killed."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if _alive(data["driver_pid"], data["driver_start"]):
        return []
    targets = {pid for pid, started in data["processes"] if _alive(pid, started)}
    if data.get("node_marker"):
        targets |= set(_node_processes(data["node_marker"]))
    killed = []
    for pid in sorted(targets):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # the agents ignore SIGTERM once their raylet is gone
            killed.append(pid)
    path.unlink(missing_ok=True)
    return killed


def reap_leftovers(temp_dir: Path) -> list[int]:
    """Before starting a new local Ray: reap every recorded cluster under Ray's temp dir whose driver died."""
    from dicelab.sweeps.ray_adapter import SESSION_GLOB

    killed: list[int] = []
    for path in sorted(temp_dir.glob(f"{SESSION_GLOB}/{RECORD_NAME}")):
        killed += reap(path)
    return killed


def _watch(path: Path) -> None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    while path.exists() and _alive(data["driver_pid"], data["driver_start"]):
        time.sleep(POLL_S)
    if path.exists():  # the driver died without releasing its cluster
        reap(path)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch(Path(sys.argv[1]))
