"""Three faults in a row on one sweep, each met by the next driver, as a user meets them:

1. The disk of Tune's storage (`search.storage`: checkpoints and experiment state) fills up in the middle
   of the sweep: the trial that was saving a checkpoint fails with a clear reason, the sweep ends (exit 0:
   the other trial completed) saying the storage is full and how to continue. Tune's state files are then
   cut in half as well (which of them the full disk cuts short depends on timing: in one run it was the
   searcher's state, "Failed to restore the run state", and Tune started the sweep over with a duplicated
   run).
2. Space again, `--resume --retry-failed`: the state is put back from its last good copies (said so) and the
   failed trial continues in its own run; while it trains, the driver is killed with kill -9 on its private
   local Ray: no Ray process may outlive it (before the fix, ray::DashboardAgent and ray::RuntimeEnvAgent
   stayed alive for good). The cached features the sweep built are then cut to 100 bytes (as a full disk or
   a crash mid-copy leaves them).
3. `--resume`: the driver reads the cache to build the trials' inputs, rebuilds it (a warning says so), and
   the sweep trains to the end: the finished trial is not run again, nothing is lost or duplicated.

Before the fixes, the driver crashed at the end of (1) on a trial error pickle the disk had cut short, and a
resume whose searcher state was cut short started the sweep over. The full disk is real: a small tmpfs
mounted as the sweep's storage (needs root, as in CI's containers; skipped elsewhere). One sweep for the
three faults: each driver costs a start of torch, transformers, Tune, MLflow and a local Ray, so chained they
cost three drivers instead of four. Trials run one at a time on one worker (`max_concurrent: 1`), and a
failed trial is not retried on the full disk (`max_failures: 0`: the retry fails the same way, in a new
worker). A full artifact disk: test_fault_disk_full.py; the cache damaged three ways, directly:
test_fault_cache.py; Ctrl-C of the driver: tests/integration/test_sweep_local.py.
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
from dicelab.sweeps.trainable import WORKER_PID
from dicelab.sweeps.tune_storage import is_complete, state_files
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import RESTORED_FROM_STEP

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

EPOCHS = 10
NAME = "fault-chain"


def _experiment(storage: Path) -> Path:
    """The sweep's Tune experiment directory: <storage>/<sweep name>/<invocation>."""
    (directory,) = storage.glob("*/*/tuner.pkl")
    return directory.parent


def _alive(processes: set[tuple[int, int | None]]) -> list[int]:
    """The pids of `processes` ((pid, start time)) still running: a reused pid is another process."""
    return sorted(pid for pid, started in processes if started is not None and start_time(pid) == started)


@pytest.fixture
def local_tools(sweep_tools):
    """sweep_tools whose local Ray keeps its session under a temp dir of this test (short: socket paths)."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="dl-f-", dir="/tmp"))
    yield dataclasses.replace(sweep_tools, env={**sweep_tools.env, "RAY_TMPDIR": str(ray_tmp)})
    shutil.rmtree(ray_tmp, ignore_errors=True)


def test_full_checkpoint_disk_then_driver_kill_9_then_resume(
    tmp_path, small_disks, local_tools, store_looks, fault_figure
):
    tools = local_tools
    storage = small_disks.mount(tmp_path / "tune", "32m")
    config = tools.write_sweep(
        tmp_path,
        NAME,
        {
            "seeds": [1, 2],
            "space": {"loss.name": {"grid": ["ce"]}},
            "max_concurrent": 1,
            "max_failures": 0,
            "storage": str(storage),
            "checkpoint_interval_s": 0,  # a checkpoint per evaluation: the disk fills with them
            "save_model": "none",
        },
        train={"epochs": EPOCHS, "save_model": "none"},
        # half a second or more per epoch: the faults land mid-trial
        data={"synthetic": {"n_train": 512, "n_dev": 64}},
    )
    uri = f"sqlite:///{tmp_path / '.dicelab' / 'mlflow.db'}"
    store = store_looks(tmp_path / ".dicelab" / "mlflow.db")
    dicelab = str(Path(tools.env["PATH"].split(":")[0]) / "dicelab")

    # 1. the storage's disk full while the second trial evaluates
    def one_finished_one_evaluating():
        trials = store.trials(NAME)
        finished = [look for look in trials if look.status == "FINISHED"]
        running = [look for look in trials if look.status == "RUNNING" and look.evaluations >= 2]
        return (finished[0], running[0]) if finished and running else None

    driver = tools.start(["sweep", str(config)], tmp_path)
    try:
        done, _ = tools.wait_until(one_finished_one_evaluating, 600, "a finished and a running trial", driver)
        small_disks.fill(storage / "filler")  # the disk is full from here on
        code = driver.popen.wait(timeout=600)
    finally:
        driver.stop()
    log = driver.log.read_text()
    _, trials = tools.sweep_runs(uri, NAME)
    failed = [run for run in trials if run.info.status == "FAILED"]
    assert code == 0 and len(failed) == 1, log[-4000:]  # one trial completed: the sweep ran, no crash
    assert "No space left on device" in failed[0].data.tags[names.REASON], failed[0].data.tags
    assert "Tune's storage is full" in log and "--resume --retry-failed" in log, log[-4000:]
    # A client once the driver has made the store (from its template): made here first, it would make it with
    # MLflow's migrations, seconds of this process's CPU before the driver could start.
    client = MlflowClient(uri)
    finished_at = client.get_run(done.run_id).info.end_time
    cut_short = [path.name for path in state_files(_experiment(storage)) if not is_complete(path)]
    for path in state_files(_experiment(storage)):
        if path.name.startswith(("experiment_state-", "basic-variant-state-")):
            os.truncate(path, path.stat().st_size // 2)
    (storage / "filler").unlink()  # space again

    # 2. --resume --retry-failed, killed with kill -9 while the failed trial trains again
    victim = failed[0].info.run_id

    args = [dicelab, "sweep", str(config), "--resume", "--retry-failed"]
    resuming = tools.start_process("dicelab-resume", args, tmp_path)

    def training_again():
        """The failed trial's run reopened by a worker of this driver's Ray (its pid tag is the new one)."""
        for look in store.trials(NAME):
            if look.run_id == victim and look.status == "RUNNING":
                worker = int(look.tags.get(WORKER_PID, 0))
                return look if worker in _descendants(resuming.popen.pid) else None
        return None

    try:
        reopened = tools.wait_until(training_again, 600, "the failed trial to train again", resuming)
        # The driver's descendants: its Ray cluster (GCS, raylet, agents, the trial's worker) and watchdog.
        # By ancestry, not by the RAY_NODE_ID in their environment: a process that sets its title (Ray's
        # agents and workers do) may overwrite what /proc shows of its environment.
        cluster = {(pid, start_time(pid)) for pid in _descendants(resuming.popen.pid)}
        assert len(cluster) >= 4, f"the driver's Ray processes were not found: {cluster}"
        os.kill(resuming.popen.pid, signal.SIGKILL)  # the driver only, as `kill -9 PID` does
        resuming.popen.wait(timeout=60)
        killed_at = time.monotonic()
        deadline = killed_at + 60
        while _alive(cluster) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _alive(cluster)
        cleaned_s = time.monotonic() - killed_at
    finally:
        resuming.stop()
    resume_log = resuming.log.read_text()
    assert not left, f"processes of the killed driver's Ray cluster still alive after 60 s: {left}"
    assert "was cut short" in resume_log, resume_log[-4000:]  # put back from the last good copies
    # From its last checkpoint; or, when the put-back state (a second or two older) names a checkpoint Tune
    # has since replaced, from the start, said so, in the same run. A third path was seen once in CI: from
    # the start without that message (cause not established). Every path must keep one run per trial and
    # every evaluation (asserted below); the figure says which path this run took.
    restored = int(reopened.tags.get(RESTORED_FROM_STEP, 0))
    started_over = "it starts over in its run" in resume_log
    arrows = sorted(tmp_path.glob(f".dicelab/**/{FEATURES_DIR}/*/train/*.arrow"))
    assert arrows, sorted(str(path) for path in tmp_path.rglob("*.arrow"))
    for arrow in arrows:
        arrow.write_bytes(arrow.read_bytes()[:100])

    # 3. --resume, through the damaged cache, to the end
    started = time.monotonic()
    resumed = tools.run(["sweep", str(config), "--resume"], tmp_path, timeout_s=600)
    recover_s = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "building them again" in resumed.stderr, resumed.stderr[-3000:]  # the truncated cache, rebuilt
    parents, trials = tools.sweep_runs(uri, NAME)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    runs = tools.by_trial(parents[0], trials)  # one run per trial: nothing duplicated
    states = {trial: (run.info.status, run.data.tags.get(names.REASON)) for trial, run in runs.items()}
    assert len(runs) == 2 and all(status == "FINISHED" for status, _ in states.values()), (
        f"{states}\n{resumed.stdout[-4000:]}\n{resumed.stderr[-4000:]}"
    )
    assert runs[done.tags[names.TRIAL_ID]].info.end_time == finished_at  # not run again
    lost = tools.lost_evaluations(client, runs.values(), EPOCHS)
    assert lost == 0
    # what the MLflow UI shows first: the training view, and names that carry the result
    experiment = client.get_experiment(parents[0].info.experiment_id)
    assert experiment.tags[names.EXPERIMENT_KIND] == names.EXPERIMENT_KIND_TRAINING
    labelled = re.compile(r"ce seed=\d · f1 \d\.\d{4}( degenerate)?")
    assert all(labelled.fullmatch(run.info.run_name) for run in trials), [run.info.run_name for run in trials]

    duplicated = len(trials) - len(runs)
    fault_figure(
        "checkpoint disk (search.storage) full mid-sweep (tmpfs), then --resume --retry-failed",
        trials_finished=f"1/2, then {len(runs)}/2 (after the kill below)",
        runs_duplicated=duplicated,
        evaluations_lost=lost,
        seconds_to_recover=f"cut short by the disk: {cut_short or 0}; failed trial "
        + (
            f"continued from step {restored}"
            if restored
            else "started over"
            if started_over
            else "started from its first step, no message: cause not established"
        ),
    )
    fault_figure(
        "driver kill -9 (local Ray) during that resume, cached features cut short, then --resume",
        trials_finished=f"{len(runs)}/2",
        runs_duplicated=duplicated,
        evaluations_lost=lost,
        seconds_to_recover=f"{recover_s:.0f} (resume); Ray leftovers gone {cleaned_s:.1f} s after the kill",
    )
