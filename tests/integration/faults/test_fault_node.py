"""Three faults of a sweep on a 2-node cluster tracked by an MLflow server, one after the other:

1. The MLflow server stopped for OUTAGE_S seconds in the middle of the sweep and started again: the trials
   wait it out (the client's retries).
2. Then the worker node killed: its trial is retried from its last checkpoint, in the same MLflow run.
3. Then a new node joins the running cluster, as an autoscaler adds a machine while trials wait for the
   CPU the lost node had: the waiting trials run on it.

Nothing is lost or duplicated. One sweep for all three: each sweep costs a driver (torch, transformers,
Tune and MLflow imports) and its trials' workers.

Placement is deterministic: each node has one CPU, each trial takes one, and with `reuse_actors: false`
every trial runs in a worker of its own on the node Ray reserved for it (with reuse, a trial whose worker
is still starting on a node is handed a finished trial's worker wherever that is: a node that joins
would get none while the others' trials end first; docs/clusters.md). So the first two trials start one
on each node. The outage starts at the first evaluation. After the kill, the head node's one CPU is left
for the retried trial and the later ones (max_concurrent keeps two in the sweep, so one of them waits
whenever the head node's is running): the head node alone would need about two trials' time for them,
the new node starts in a fraction of that. Which trial runs where is read from the trial's run (its Ray
node id tag), and the node is killed by the processes this test started (its `ray start` process group
and the workers Ray started for it), never by name.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from dicelab.sweeps.trainable import RAY_NODE, RESTORED_FROM_STEP, WORKER_PID
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

EPOCHS = 8
OUTAGE_S = 15
SEEDS = [1, 2, 3, 4]  # two trials at once: two still to come when the worker node is killed
HEAD, WORKER = 0, 1  # the indexes of the nodes in the cluster's nodes
NAME = "fault-node"


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed process whose parent has not reaped it yet)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _mlflow_server(tools, command, store: Path, port: int):
    return tools.start_process("mlflow-server", command(store, port), store)


def test_mlflow_server_restarted_then_worker_node_killed_then_a_node_joins_mid_sweep(
    tmp_path, own_ray_cluster, sweep_tools, store_looks, fault_figure, mlflow_command
):
    cluster = own_ray_cluster
    store = tmp_path / "mlflow"
    store.mkdir()
    port = sweep_tools.free_port()
    uri = f"http://127.0.0.1:{port}"
    config = sweep_tools.write_sweep(
        tmp_path,
        NAME,
        {
            "seeds": SEEDS,
            "space": {"loss.name": {"grid": ["ce"]}},
            "max_concurrent": 2,
            "max_failures": 1,
            "reuse_actors": False,  # a trial waiting for a node runs there once it joins (docstring)
            "checkpoint_interval_s": 0,  # a checkpoint per evaluation: the moved trial continues from one
            "save_model": "none",
        },
        train={"epochs": EPOCHS, "save_model": "none"},
        data={"synthetic": {"n_train": 512, "n_dev": 64}},  # half a second or more per epoch
    )
    looks = store_looks(store / "mlflow.db")  # the server's store, read directly: no load on the server
    client = MlflowClient(uri)
    worker_id = cluster.node_ids[WORKER]

    def evaluating():
        """Some trial has logged an evaluation; failing at once if one finished and none ran on the worker
        node."""
        trials = looks.trials(NAME)
        if any(look.status == "FINISHED" for look in trials):
            nodes = {look.tags.get(RAY_NODE) for look in trials}
            assert worker_id in nodes, f"no trial ran on the worker node before one finished: {nodes}"
        return any(look.evaluations for look in trials)

    def evaluating_on_worker():
        """The running trial on the worker node once it has logged two evaluations: the first one's
        checkpoint has then reached Tune (killed earlier, the retry rightly starts over)."""
        for look in looks.trials(NAME):
            here = look.status == "RUNNING" and look.tags.get(RAY_NODE) == worker_id
            if here and look.evaluations >= 2:
                return look
        return None

    server = _mlflow_server(sweep_tools, mlflow_command, store, port)
    driver = None
    try:
        sweep_tools.wait_until(lambda: sweep_tools.mlflow_healthy(uri), 120, "the MLflow server", server)
        args = ["sweep", str(config), "--address", cluster.address, "--tracking-uri", uri]
        driver = sweep_tools.start(args, tmp_path)

        # 1. the MLflow server down for OUTAGE_S seconds
        sweep_tools.wait_until(evaluating, 600, "the first evaluation", driver)
        server.stop()
        stopped_at = time.time()
        time.sleep(OUTAGE_S)
        server = _mlflow_server(sweep_tools, mlflow_command, store, port)
        sweep_tools.wait_until(
            lambda: sweep_tools.mlflow_healthy(uri), 120, "the restarted MLflow server", server
        )
        restarted_at = time.time()

        # 2. the worker node killed
        victim = sweep_tools.wait_until(evaluating_on_worker, 600, "a trial evaluating on the worker", driver)
        cluster.kill_node(WORKER)
        killed_at = time.time()
        # the trial's worker went with its node (else it could go on logging evaluations)
        pid = int(victim.tags[WORKER_PID])
        sweep_tools.wait_until(lambda: not _running(pid), 10, f"the trial's worker {pid} to die")

        # 3. a new node joins while trials wait for a CPU
        joining_at = time.time()
        joined_id = cluster.add_node()
        joined_s = time.time() - joining_at
        assert driver.popen.wait(timeout=600) == 0, driver.log.read_text()[-4000:]
        finished_s = time.time() - killed_at

        parents, trials = sweep_tools.sweep_runs(uri, NAME)
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"
        runs = sweep_tools.by_trial(parents[0], trials)  # one run per trial: nothing duplicated
        states = {trial: (run.info.status, run.data.tags.get(names.REASON)) for trial, run in runs.items()}
        assert len(runs) == len(SEEDS), states
        assert all(status == "FINISHED" for status, _ in states.values()), states
        nodes = {trial: run.data.tags[RAY_NODE] for trial, run in runs.items()}
        retried = runs[victim.tags[names.TRIAL_ID]]
        # it moved to a node that is left or has joined, from its checkpoint, not from the start
        assert nodes[victim.tags[names.TRIAL_ID]] in {cluster.node_ids[HEAD], joined_id}, nodes
        assert int(retried.data.tags[RESTORED_FROM_STEP]) > 0
        on_joined = sorted(trial for trial, node in nodes.items() if node == joined_id)
        assert on_joined, (
            f"no trial ran on the node that joined {joined_s:.0f} s after the kill: {nodes} "
            f"(head {cluster.node_ids[HEAD]}, killed {worker_id}, joined {joined_id})"
        )
        lost = sweep_tools.lost_evaluations(client, runs.values(), EPOCHS)
        assert lost == 0
        histories = {
            trial: client.get_metric_history(run.info.run_id, "dev_f1") for trial, run in runs.items()
        }
    finally:
        if driver is not None:
            driver.stop()
        server.stop()

    finished = f"{len(runs)}/{len(SEEDS)}"

    def figure(fault: str, recovered: str, trials_finished: str = finished) -> None:
        fault_figure(
            fault,
            trials_finished=trials_finished,
            runs_duplicated=len(trials) - len(runs),
            evaluations_lost=lost,
            seconds_to_recover=recovered,
        )

    # MLflow timestamps are in ms. Recovered from the outage: the first evaluation logged after it began.
    after_outage = [point.timestamp / 1000 for history in histories.values() for point in history]
    after_outage = [stamp for stamp in after_outage if stamp >= stopped_at]
    recovered = f"{min(after_outage) - restarted_at:.0f} after the restart" if after_outage else "none after"
    figure(f"MLflow server stopped for {OUTAGE_S} s mid-sweep, restarted", recovered)
    # Recovered from the kill: the retried trial's first evaluation after it.
    after_kill = [point.timestamp / 1000 for point in histories[victim.tags[names.TRIAL_ID]]]
    recover_s = min(stamp for stamp in after_kill if stamp > killed_at) - killed_at
    figure(
        "worker node of a 2-node cluster killed mid-sweep",
        f"{recover_s:.0f} to its next evaluation (sweep done after {finished_s:.0f})",
    )
    # The joined node's first evaluation (a retried trial's run also has the killed node's, before it).
    on_joined_stamps = [point.timestamp / 1000 for trial in on_joined for point in histories[trial]]
    first_s = min(stamp for stamp in on_joined_stamps if stamp > joining_at) - joining_at
    figure(
        "a node joined the cluster after the kill, trials waiting",
        f"{joined_s:.0f} to join, {first_s:.0f} to its first evaluation",
        f"{finished}, {len(on_joined)} on the new node",
    )
