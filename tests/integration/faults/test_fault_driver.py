"""The sweep's driver killed with kill -9 on a private local Ray: no Ray process may outlive it, and --resume
finishes the sweep. (Ctrl-C of the driver: tests/integration/test_sweep_local.py reports its figures.)

The resume also meets a damaged feature cache: between the kill and the resume the cached Arrow files are cut
to 100 bytes, and the resuming driver, which reads the cache to build the trials' inputs, rebuilds them (a
warning says so) and the sweep trains to the end on them. (The same damage met by the cache directly, three
ways: test_fault_cache.py.) Both faults in one sweep: a process meeting a damaged cache costs a start of
torch, transformers and MLflow, which the resume pays anyway.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from dicelab.data.cache import FEATURES_DIR
from dicelab.sweeps.local_ray import _descendants, start_time
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

EPOCHS = 6


def _alive(processes: set[tuple[int, int | None]]) -> list[int]:
    """The pids of `processes` ((pid, start time)) still running: a reused pid is another process."""
    return sorted(pid for pid, started in processes if started is not None and start_time(pid) == started)


@pytest.fixture
def local_tools(sweep_tools, tmp_path):
    """SweepTools whose local Ray keeps its session under a temp dir of this test (short: socket paths)."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="dl-f-", dir="/tmp"))
    yield dataclasses.replace(sweep_tools, env={**sweep_tools.env, "RAY_TMPDIR": str(ray_tmp)})
    shutil.rmtree(ray_tmp, ignore_errors=True)


def test_kill_9_of_the_driver_leaves_no_ray_process_and_resume_finishes(
    tmp_path, local_tools, fault_figure, seldom
):
    name = "fault-driver-kill"
    config = local_tools.write_sweep(
        tmp_path,
        name,
        {"seeds": [1, 2, 3], "space": {"loss.name": {"grid": ["ce"]}}, "max_concurrent": 1},
        train={"epochs": EPOCHS},
    )
    uri = f"sqlite:///{tmp_path / '.dicelab' / 'mlflow.db'}"
    client = MlflowClient(uri)

    def one_finished_one_running() -> bool:
        _, trials = local_tools.sweep_runs(uri, name)
        statuses = [run.info.status for run in trials]
        return "FINISHED" in statuses and "RUNNING" in statuses

    driver = local_tools.start(["sweep", str(config)], tmp_path)
    try:
        local_tools.wait_until(
            seldom(one_finished_one_running), 400, "a finished and a running trial", driver
        )
        # The driver's descendants: its Ray cluster (GCS, raylet, agents, the trial's worker) and watchdog.
        # By ancestry, not by the RAY_NODE_ID in their environment: a process that sets its title (Ray's
        # agents and workers do) may overwrite what /proc shows of its environment.
        cluster = {(pid, start_time(pid)) for pid in _descendants(driver.popen.pid)}
        assert len(cluster) >= 4, f"the driver's Ray processes were not found: {cluster}"
        os.kill(driver.popen.pid, signal.SIGKILL)  # the driver only, as `kill -9 PID` does
        driver.popen.wait(timeout=60)
        killed_at = time.monotonic()
        # before the fix, ray::DashboardAgent and ray::RuntimeEnvAgent stayed alive for good
        deadline = killed_at + 60
        while _alive(cluster) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _alive(cluster)
        cleaned_s = time.monotonic() - killed_at
    finally:
        driver.stop()
    assert not left, f"processes of the killed driver's Ray cluster still alive after 60 s: {left}"
    # the cached features the sweep built, cut short (as a full disk or a crash mid-copy leaves them)
    arrows = sorted(tmp_path.glob(f".dicelab/**/{FEATURES_DIR}/*/train/*.arrow"))
    assert arrows, sorted(str(path) for path in tmp_path.rglob("*.arrow"))
    for arrow in arrows:
        arrow.write_bytes(arrow.read_bytes()[:100])

    started = time.monotonic()
    resumed = local_tools.run(["sweep", str(config), "--resume"], tmp_path, timeout_s=600)
    recover_s = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "building them again" in resumed.stderr, resumed.stderr[-3000:]  # the truncated cache, rebuilt
    parents, trials = local_tools.sweep_runs(uri, name)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    runs = local_tools.by_trial(parents[0], trials)  # one run per trial: nothing duplicated
    assert len(runs) == 3 and all(run.info.status == "FINISHED" for run in runs.values())
    lost = local_tools.lost_evaluations(client, runs.values(), EPOCHS)
    assert lost == 0
    # what the MLflow UI shows first: the training view, and names that carry the result
    experiment = client.get_experiment(parents[0].info.experiment_id)
    assert experiment.tags[names.EXPERIMENT_KIND] == names.EXPERIMENT_KIND_TRAINING
    labelled = re.compile(r"ce seed=\d · f1 \d\.\d{4}( degenerate)?")
    assert all(labelled.fullmatch(run.info.run_name) for run in trials), [run.info.run_name for run in trials]
    fault_figure(
        "driver kill -9 (local Ray), then --resume",
        trials_finished=f"{len(runs)}/3",
        runs_duplicated=len(trials) - len(runs),
        evaluations_lost=lost,
        seconds_to_recover=f"{recover_s:.0f} (resume); Ray leftovers gone {cleaned_s:.1f} s after the kill",
    )
