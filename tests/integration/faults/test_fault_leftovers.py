"""The next local sweep reaps what a killed driver's cluster left (its watchdog dead too), and only that."""

from __future__ import annotations

import json
import subprocess
import sys

from dicelab.sweeps import local_ray

# A stand-in for ray::DashboardAgent: ignores SIGTERM, runs until killed.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"


def _stubborn(node_id: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", STUBBORN], env={"RAY_NODE_ID": node_id})


def test_leftovers_of_a_dead_driver_are_killed_and_other_clusters_are_not(tmp_path):
    dead_driver = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_driver.wait()
    live_driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    ours, theirs, alive_cluster = _stubborn("node-a"), _stubborn("node-b"), _stubborn("node-c")
    processes = [live_driver, ours, theirs, alive_cluster]
    try:
        sessions = (("session_1", dead_driver, "node-a"), ("session_2", live_driver, "node-c"))
        for session, driver, node in sessions:
            (tmp_path / session).mkdir()
            record = {
                "driver_pid": driver.pid,
                "driver_start": 1 if driver is dead_driver else local_ray.start_time(driver.pid),
                "node_marker": f"RAY_NODE_ID={node}",  # in the environment of the node's processes
                "processes": [],
            }
            (tmp_path / session / local_ray.RECORD_NAME).write_text(json.dumps(record))

        killed = local_ray.reap_leftovers(tmp_path)

        assert killed == [ours.pid]
        assert ours.wait(timeout=10) == -9
        assert theirs.poll() is None  # another cluster (node-b), never recorded: untouched
        assert alive_cluster.poll() is None  # its driver is alive: its cluster is in use
        assert not (tmp_path / "session_1" / local_ray.RECORD_NAME).exists()
        assert (tmp_path / "session_2" / local_ray.RECORD_NAME).exists()
    finally:
        for process in processes:
            process.kill()
            process.wait()
