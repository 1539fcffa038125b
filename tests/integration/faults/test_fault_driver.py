"""The sweep's driver killed with kill -9 on a private local Ray: no Ray process may outlive it, and --resume
finishes the sweep. (Ctrl-C of the driver: tests/integration/test_sweep_local.py reports its figures.)"""

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

from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

EPOCHS = 6
PROC = Path("/proc")


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def _group_node_ids(group: int) -> set[str]:
    """The Ray node ids in the environments of the processes of a process group (the driver's cluster)."""
    found = set()
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == group:
                    found.add(_environ(int(entry.name)).get("RAY_NODE_ID"))
            except ProcessLookupError:
                continue
    return found - {None}


def _processes_of(node_ids: set[str]) -> list[int]:
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit() and _environ(int(entry.name)).get("RAY_NODE_ID") in node_ids:
            found.append(int(entry.name))
    return found


@pytest.fixture
def local_tools(sweep_tools, tmp_path):
    """SweepTools whose local Ray keeps its session under a temp dir of this test (short: socket paths)."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="dl-f-", dir="/tmp"))
    yield dataclasses.replace(sweep_tools, env={**sweep_tools.env, "RAY_TMPDIR": str(ray_tmp)})
    shutil.rmtree(ray_tmp, ignore_errors=True)


def test_kill_9_of_the_driver_leaves_no_ray_process_and_resume_finishes(tmp_path, local_tools, fault_figure):
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
        local_tools.wait_until(one_finished_one_running, 400, "a finished and a running trial", driver)
        node_ids = _group_node_ids(driver.popen.pid)
        assert node_ids, "no Ray process found in the driver's process group"
        os.kill(driver.popen.pid, signal.SIGKILL)  # the driver only, as `kill -9 PID` does
        driver.popen.wait(timeout=60)
        killed_at = time.monotonic()
        # before the fix, ray::DashboardAgent and ray::RuntimeEnvAgent stayed alive for good
        deadline = killed_at + 60
        while _processes_of(node_ids) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _processes_of(node_ids)
        cleaned_s = time.monotonic() - killed_at
    finally:
        driver.stop()
    assert not left, f"processes of the killed driver's Ray cluster still alive after 60 s: {left}"

    started = time.monotonic()
    resumed = local_tools.run(["sweep", str(config), "--resume"], tmp_path, timeout_s=600)
    recover_s = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
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
