"""The worker node of a 2-node cluster killed in the middle of a sweep: its trial is retried on the node that
is left, from its last checkpoint, in the same MLflow run; nothing is lost or duplicated.

Placement is deterministic: each node has one CPU and the sweep runs its two 1-CPU trials at once, so one
of them runs on the worker node. Each trial lasts well beyond a worker's start-up (imports: seconds): else
the trial that finishes first hands its worker (reuse_actors) to the other one before the worker node's
worker is up, and both run on the head node. Which trial runs where is read from the trial's run (its Ray
node id tag), and the node is killed by the processes this test started (its `ray start` process group
and the workers Ray started for it), never by name.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run

from dicelab.sweeps.trainable import RAY_NODE, RESTORED_FROM_STEP, WORKER_PID
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

EPOCHS = 12
WORKER = 1  # the index of the worker node in the cluster's nodes


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed process whose parent has not reaped it yet)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_worker_node_killed_mid_sweep(tmp_path, own_ray_cluster, sweep_tools, fault_figure, seldom):
    cluster = own_ray_cluster
    name = "fault-node"
    config = sweep_tools.write_sweep(
        tmp_path,
        name,
        {
            "seeds": [1, 2],
            "space": {"loss.name": {"grid": ["ce"]}},
            "max_concurrent": 2,
            "max_failures": 1,
            "checkpoint_interval_s": 0,  # a checkpoint per evaluation: the moved trial continues from one
        },
        train={"epochs": EPOCHS},
        data={"synthetic": {"n_train": 1024, "n_dev": 64}},  # one to two seconds per epoch
    )
    uri = f"sqlite:///{tmp_path / '.dicelab' / 'mlflow.db'}"
    client = MlflowClient(uri)
    worker_id = cluster.node_ids[WORKER]

    def evaluating_on_worker() -> Run | None:
        """The running trial on the worker node once it has logged two evaluations: the first one's
        checkpoint has then reached Tune (killed earlier, the retry rightly starts over)."""
        _, trials = sweep_tools.sweep_runs(uri, name)
        for run in trials:
            here = run.info.status == "RUNNING" and run.data.tags.get(RAY_NODE) == worker_id
            if here and len(client.get_metric_history(run.info.run_id, "dev_f1")) >= 2:
                return run
        return None

    args = ["sweep", str(config), "--address", cluster.address, "--tracking-uri", uri]
    driver = sweep_tools.start(args, tmp_path)
    try:
        victim = sweep_tools.wait_until(
            seldom(evaluating_on_worker), 400, "a trial evaluating on the worker node", driver
        )
        cluster.kill_node(WORKER)
        killed_at = time.time()
        # the trial's worker went with its node (else it could go on logging evaluations)
        pid = int(victim.data.tags[WORKER_PID])
        sweep_tools.wait_until(lambda: not _running(pid), 10, f"the trial's worker {pid} to die")
        assert driver.popen.wait(timeout=600) == 0, driver.log.read_text()[-4000:]
        finished_s = time.time() - killed_at
    finally:
        driver.stop()

    parents, trials = sweep_tools.sweep_runs(uri, name)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    runs = sweep_tools.by_trial(parents[0], trials)  # one run per trial: nothing duplicated
    states = {trial: (run.info.status, run.data.tags.get(names.REASON)) for trial, run in runs.items()}
    assert len(runs) == 2 and all(status == "FINISHED" for status, _ in states.values()), states
    retried = runs[victim.data.tags[names.TRIAL_ID]]
    assert retried.data.tags[RAY_NODE] != worker_id  # it moved to the node that is left
    assert int(retried.data.tags[RESTORED_FROM_STEP]) > 0  # from its checkpoint, not from the start
    lost = sweep_tools.lost_evaluations(client, runs.values(), EPOCHS)
    assert lost == 0
    # recovered: the retried trial's first evaluation after the kill (MLflow timestamps are in ms)
    after = [point.timestamp / 1000 for point in client.get_metric_history(retried.info.run_id, "dev_f1")]
    recover_s = min(stamp for stamp in after if stamp > killed_at) - killed_at
    fault_figure(
        "worker node of a 2-node cluster killed mid-sweep",
        trials_finished=f"{len(runs)}/2",
        runs_duplicated=len(trials) - len(runs),
        evaluations_lost=lost,
        seconds_to_recover=f"{recover_s:.0f} to its next evaluation (sweep done after {finished_s:.0f})",
    )
