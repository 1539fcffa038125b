"""Sweeps against real components: a two-node Ray cluster with token auth, `dicelab submit` to it, and an
MLflow server over HTTP. Each test reads back what the sweep recorded: the parent run, its nested children,
their params, metrics, statuses and reasons. A small seed race is killed mid-way and resumed: it continues
where it was, with no trial run twice and no run duplicated, and its decision and eliminations are recorded
on the parent run.

Also on that cluster: fractional GPUs packed four to a declared GPU (with a plugin's loss, sent with the
driver's runtime env), and the preflight (the cluster's Ray and Python versions against the driver's, a
wrong token one line, exit 2).

The nested runs and the failed, non-finite and crashed trials are one sweep's (a module fixture: a sweep's
driver and trial workers cost far more than its tiny trials). Every test here uses the session's cluster
(tests/integration/conftest.py), and the sweeps its MLflow server: they are one module, so `pytest -n 2
--dist loadfile` runs them on one worker, which starts that cluster and server once.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run
from tests.plugins.conftest import poly1_source

from dicelab.plugins.loading import digest_of
from dicelab.sweeps import ray_adapter
from dicelab.sweeps.parent_run import COST_CPU_HOURS, COST_GPU_HOURS, COST_TRIALS
from dicelab.sweeps.race_records import DECISION_ARTIFACT, ELIMINATIONS_ARTIFACT
from dicelab.sweeps.ray_adapter import ClusterMismatch, Versions
from dicelab.sweeps.trainable import GPU_IDS, NODE_IP, RAY_NODE, RESTORED_FROM_STEP, WORKER_PID
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def mixed_sweep(tmp_path_factory, ray_cluster, mlflow_server, sweep_tools):
    """One sweep of 8 trials on the two-node cluster, for the two tests below (a sweep's driver and its trial
    workers cost far more than the tiny trials): per seed (1, 2) a normal trial, one whose learning rate
    overflows the weights (non-finite loss), one that asks for CUDA on a CPU-only cluster (raises), and a long
    one whose worker is killed mid-way (only the first found: retried from its last checkpoint).

    Returns (the driver's exit code, its log, the parent run, the trial runs by trial id, node id -> the
    trials' CPU reservations Ray placed there)."""
    if _cuda_available():
        pytest.skip("this machine has CUDA: the cuda trials would not fail")
    directory = tmp_path_factory.mktemp("mixed")
    config = sweep_tools.write_sweep(
        directory,
        "it-cluster",
        {
            "seeds": [1, 2],
            "conditional": {
                "ce": {"space": {"train.learning_rate": {"grid": [1.0e-3, 1.0e39]}}},
                "dice": {"space": {"train.device": {"grid": ["cuda"]}}},
                # long enough to be killed after two evaluations and a checkpoint (the other focal trial is a
                # second chance), short enough to cost little: each evaluation also saves a checkpoint
                "focal": {"space": {"train.epochs": {"grid": [12]}}},
            },
            "max_concurrent": 2,
            "max_failures": 1,
            "checkpoint_interval_s": 0,  # the killed trial continues from its last evaluation
        },
        data={"synthetic": {"n_train": 96, "n_dev": 32}},
    )
    args = ["sweep", str(config), "--address", ray_cluster.address, "--tracking-uri", mlflow_server]
    driver = sweep_tools.start(args, directory)
    try:
        focal = sweep_tools.wait_until(
            lambda: _checkpointed(sweep_tools, mlflow_server, "it-cluster", "focal", directory),
            400,
            "a checkpoint of a focal trial",
            driver,
            every_s=1.5,  # a look asks the server for the runs and metric histories
        )
        os.kill(int(focal.data.tags[WORKER_PID]), signal.SIGKILL)  # the trial's worker dies (same machine)
        driver.popen.wait(timeout=600)
    finally:
        driver.stop()
    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-cluster")
    assert len(parents) == 1, parents
    runs = sweep_tools.by_trial(parents[0], trials)  # the retried trial kept its one run
    # where Ray reserved the trials' CPUs: this sweep's placement groups, found by its driver's Ray job
    reserved = reservations(
        ray_cluster, sweep_tools, job_id=job_of(ray_cluster, sweep_tools, driver.popen.pid)
    )
    return driver.popen.returncode, driver.log.read_text(), parents[0], runs, reserved


def test_sweep_on_a_two_node_cluster_records_nested_runs(mixed_sweep, mlflow_server, ray_cluster):
    returncode, log, parent, runs, reserved = mixed_sweep
    assert returncode == 0, log
    # a CPU-only sweep uses both nodes' CPUs: 2 trials at once at 1 CPU, one on each node's
    assert set(reserved) == set(ray_cluster.node_ids), reserved
    assert "4 completed" in log
    assert len(runs) == 8
    assert parent.info.status == "FINISHED"
    assert parent.data.params["search.keys"] == (
        "loss.name,train.learning_rate,train.device,train.epochs,train.seed"
    )
    assert parent.data.metrics["trials_completed"] == 4
    completed = [run for run in runs.values() if run.data.tags[names.OUTCOME] == names.COMPLETED]
    assert sorted((r.data.params["loss.name"], r.data.params["train.seed"]) for r in completed) == [
        ("ce", "1"),
        ("ce", "2"),
        ("focal", "1"),
        ("focal", "2"),
    ]
    client = MlflowClient(mlflow_server)
    for run in completed:
        epochs = int(run.data.params["train.epochs"])
        assert run.info.status == "FINISHED"
        assert run.data.params["data.source"] == "synthetic_pairs"
        assert run.data.params["train.num_threads"] == "1"  # a trial's torch threads follow its CPUs
        assert {"dev_f1", "best_dev_f1", "train_loss", "epoch"} <= set(run.data.metrics)
        history = client.get_metric_history(run.info.run_id, "dev_f1")
        assert len({point.step for point in history}) == epochs, history  # one per epoch
        if RESTORED_FROM_STEP not in run.data.tags:  # a restarted trial may log an evaluation again
            assert len(history) == epochs
        assert run.data.tags[RAY_NODE]  # where it ran (which node depends on timing, so not asserted)


def test_failed_nan_and_crashed_trials_are_recorded_and_the_sweep_goes_on(mixed_sweep, mlflow_server):
    returncode, log, parent, runs, _ = mixed_sweep
    assert returncode == 0, log  # some trials failed, the sweep ran: exit 0
    assert parent.info.status == "FINISHED"
    assert len(runs) == 8
    outcome = {
        (
            run.data.params["loss.name"],
            run.data.params["train.learning_rate"],
            run.data.params["train.seed"],
        ): run
        for run in runs.values()
    }
    for seed in ("1", "2"):
        normal, diverged = outcome[("ce", "0.001", seed)], outcome[("ce", "1e+39", seed)]
        assert normal.info.status == "FINISHED" and normal.data.tags[names.OUTCOME] == names.COMPLETED
        assert diverged.info.status == "FAILED" and diverged.data.tags[names.OUTCOME] == names.NON_FINITE
        assert "non-finite" in diverged.data.tags[names.REASON]
    cuda = [run for run in runs.values() if run.data.params["loss.name"] == "dice"]
    assert len(cuda) == 2
    for run in cuda:
        assert run.info.status == "FAILED" and run.data.tags[names.OUTCOME] == names.FAILED
        assert "cuda" in run.data.tags[names.REASON].lower()
    focal = [run for run in runs.values() if run.data.params["loss.name"] == "focal"]
    crashed = [run for run in focal if RESTORED_FROM_STEP in run.data.tags]
    assert len(focal) == 2 and len(crashed) == 1, [run.data.tags for run in focal]
    crashed = crashed[0]
    assert crashed.info.status == "FINISHED" and crashed.data.tags[names.OUTCOME] == names.COMPLETED
    assert int(crashed.data.tags[RESTORED_FROM_STEP]) > 0  # continued from its checkpoint
    assert names.REASON not in crashed.data.tags  # the failed attempt's reason does not stick
    # an evaluation recorded again after the restart (logged, then the worker died before its checkpoint)
    # has the same value: the trial continued exactly where its checkpoint was
    values: dict[int, set[float]] = {}
    for point in MlflowClient(mlflow_server).get_metric_history(crashed.info.run_id, "train_loss"):
        values.setdefault(point.step, set()).add(round(point.value, 6))
    assert all(len(found) == 1 for found in values.values()), values
    assert parent.data.metrics["trials_failed"] == 2 and parent.data.metrics["trials_non_finite"] == 2


def test_submit_runs_the_sweep_as_a_ray_job_with_this_dicelab(
    tmp_path, ray_cluster, mlflow_server, sweep_tools
):
    config = sweep_tools.write_sweep(
        tmp_path,
        "it-submit",
        # one trial worker: a trial actor's start (its imports) costs far more than the tiny trials
        {"space": {"loss.name": {"grid": ["ce", "focal"]}}, "max_concurrent": 1},
    )
    args = ["submit", config.name, "--address", ray_cluster.dashboard, "--tracking-uri", mlflow_server]

    without_token = {key: value for key, value in sweep_tools.env.items() if key != "RAY_AUTH_MODE"}
    refused = sweep_tools.run(args, tmp_path, timeout_s=300, env=without_token)
    assert refused.returncode == 2
    assert "RAY_AUTH_MODE=token" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1

    done = sweep_tools.run([*args, "--follow"], tmp_path, timeout_s=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted job dicelab-it-submit-" in done.stdout
    assert "SUCCEEDED" in done.stdout
    # The job imported the uploaded package, not an installed one.
    assert "runtime_resources" in done.stdout.split("from", 1)[1].split()[0]

    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-submit")
    assert len(parents) == 1 and len(trials) == 2
    sweep_tools.by_trial(parents[0], trials)
    assert {run.data.params["loss.name"] for run in trials} == {"ce", "focal"}
    assert all(run.info.status == "FINISHED" for run in trials)


def test_a_race_killed_mid_way_resumes_the_same_race(tmp_path, ray_cluster, mlflow_server, sweep_tools):
    """A killed driver resumes the sweep it was running: the same parent reopened, no trial run twice, no run
    duplicated, every trial finished; for a race, the same race (its seeds, decision and eliminations). (The
    same kill -9 and resume of a grid sweep on a local Ray: faults/test_fault_driver.py.)"""
    config = sweep_tools.write_sweep(
        tmp_path,
        "it-race",
        {
            # Two configurations on 2-3 seeds. On 64 examples and 8 steps both may predict one class
            # (degenerate): the test is about the race's record surviving the kill, not what it finds.
            "space": {"train.learning_rate": {"grid": [1.0e-3, 1.0e-9]}},
            "racing": {"min_seeds": 2, "max_seeds": 3},
            "max_concurrent": 1,
        },
    )
    args = ["sweep", str(config), "--address", ray_cluster.address, "--tracking-uri", mlflow_server]
    driver = sweep_tools.start(args, tmp_path)
    try:
        sweep_tools.wait_until(
            lambda: len(_finished(sweep_tools, mlflow_server, "it-race")) >= 2,
            400,
            "two finished trials",
            driver,
            every_s=1.5,
        )
        driver.kill()
    finally:
        driver.stop()
    finished_before = {
        run.info.run_id: run.info.end_time for run in _finished(sweep_tools, mlflow_server, "it-race")
    }

    resumed = sweep_tools.run([*args, "--resume"], tmp_path, timeout_s=600)
    _, after = sweep_tools.sweep_runs(mlflow_server, "it-race")
    listing = "\n".join(
        f"{run.info.run_id} {run.info.status} {run.data.tags.get(names.TRIAL_ID)} {run.data.params}"
        for run in after
    )
    assert resumed.returncode == 0, f"{resumed.stdout}{resumed.stderr}\n{listing}"
    assert "race:" in resumed.stdout

    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-race")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    runs = sweep_tools.by_trial(parents[0], trials)  # one run per trial
    states = {trial: (run.info.status, run.data.tags.get(names.REASON)) for trial, run in runs.items()}
    assert all(status == "FINISHED" for status, _ in states.values()), f"{states}\n{resumed.stdout[-4000:]}"
    assert len(runs) > len(finished_before)  # killed mid-sweep: the resume ran what was left
    pairs = Counter((run.data.params["train.learning_rate"], run.data.params["train.seed"]) for run in trials)
    assert set(pairs.values()) == {1}, f"a configuration ran twice on one seed: {pairs}"
    assert {seed for _, seed in pairs} <= {"1", "2", "3"}
    for lr in ("0.001", "1e-09"):  # both started on min_seeds seeds
        assert {seed for rate, seed in pairs if rate == lr} >= {"1", "2"}
    for run in trials:
        if run.info.run_id in finished_before:  # finished trials were not run again
            assert run.info.end_time == finished_before[run.info.run_id]

    client = MlflowClient(mlflow_server)
    parent = client.get_run(parents[0].info.run_id)
    assert parent.data.tags[names.RACE_DECISION]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "race")}
    assert {ELIMINATIONS_ARTIFACT, DECISION_ARTIFACT} <= artifacts
    local = client.download_artifacts(parent.info.run_id, DECISION_ARTIFACT, str(tmp_path))
    with open(local, encoding="utf-8") as handle:
        decision = json.load(handle)["decision"]
    assert decision["trials"] == len(runs) and decision["reason"] in ("separated", "equivalent", "budget")
    statuses = {run.data.tags.get(names.RACE_STATUS) for run in trials}
    assert statuses <= {"dropped", "winner", "undecided"} and None not in statuses


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _checkpointed(tools, uri: str, experiment: str, loss: str, cwd: Path) -> Run | None:
    """The RUNNING run of `loss` once its trial has saved a checkpoint (Tune's dir under cwd/.dicelab)."""
    _, trials = tools.sweep_runs(uri, experiment)
    for run in trials:
        running = run.info.status == "RUNNING" and WORKER_PID in run.data.tags
        if run.data.params.get("loss.name") == loss and running:
            trial_dirs = cwd.glob(f".dicelab/ray_results/{experiment}/*/{run.data.tags[names.TRIAL_ID]}")
            # A second evaluation logged means the first one's checkpoint has long reached Tune's driver: a
            # worker killed right as its first checkpoint appears on disk may die before Tune registered it,
            # and then the retry (rightly) starts over, which is not what this test is about.
            evaluations = MlflowClient(uri).get_metric_history(run.info.run_id, "dev_f1")
            if len(evaluations) >= 2 and any(any(path.glob("checkpoint_*")) for path in trial_dirs):
                return run
    return None


def _finished(tools, uri: str, experiment: str) -> list[Run]:
    _, trials = tools.sweep_runs(uri, experiment)
    return [run for run in trials if run.info.status == "FINISHED"]


# -- fractional GPUs ---------------------------------------------------------------------------------------

# Quarter GPUs, 8 trials: issue #25's packing case (4 per GPU at once). Each trial actor imports torch,
# transformers, Tune and MLflow (about 15 CPU-seconds); Tune's actor reuse usually starts fewer than 8.
TRIALS, SHARE = 8, 0.25
PER_GPU = round(1 / SHARE)  # each node declares one GPU


def max_overlap(runs: list[Run]) -> int:
    """The most runs that were running at one instant (start inclusive, end exclusive)."""
    edges = sorted([(run.info.start_time, 1) for run in runs] + [(run.info.end_time, -1) for run in runs])
    running = most = 0
    for _, step in edges:  # at equal times the end (-1) sorts first: a run ending as another starts
        running += step
        most = max(most, running)
    return most


def test_quarter_gpu_trials_pack_four_per_declared_gpu(tmp_path, ray_cluster, mlflow_server, sweep_tools):
    """Fractional GPUs on a real two-node Ray cluster without a GPU: each node of the tests' shared
    cluster declares one (`ray start --num-gpus=1`, tests/integration/conftest.py), and a sweep of 8 trials
    at `search.resources.gpu: 0.25` (cpu 0.25) has Ray reserve 4 trials on each node's GPU, all 8 at once
    (watched through Ray's state API while the sweep runs), and each trial runs on the GPU reserved for it:
    4 on each node. Each trial records the GPU id Ray gave it and the node and worker process that ran it
    (checked against the nodes' own worker logs); CUDA cannot see that GPU on this machine, so every trial
    trains on CPU and says so once (a tag on its run) instead of failing; the trials charge GPU-seconds for
    their reservation and the parent run sums them.

    The trials' loss is a plugin's (poly1, from a file outside the repository, `--plugin`): the driver sends
    it with its runtime env, every trial's worker on both nodes imports it and checks its hash, and the runs
    say which version ran (on this sweep rather than one of its own: a sweep's driver and its workers are
    what a test costs).

    The sweep sets `search.reuse_actors: false`. With Tune's actor reuse (dicelab's default), a trial whose
    own actor is still starting is handed a finished trial's actor instead, wherever that one runs: on this
    2-core machine actors take minutes to start (8 processes import torch, transformers, Tune and MLflow at
    once) while a tiny trial trains in seconds, so the node whose actors came up first ran all 8 trials, 4
    at a time, although Ray had reserved 4 on each GPU (docs/gpus.md, "Which node runs a trial")."""
    if _cuda_available():
        pytest.skip("this machine has CUDA: the declared GPUs would be real ones")
    config = sweep_tools.write_sweep(
        tmp_path,
        "it-gpu-packing",
        # one configuration, 8 seeds; CPUs never limit (8 x 0.25 = the cluster's 2), GPUs do (8 x 0.25 = 2)
        {
            "seeds": list(range(1, TRIALS + 1)),
            "resources": {"cpu": SHARE, "gpu": SHARE},
            "reuse_actors": False,  # each trial on the GPU share Ray reserved for it
        },
        data={"synthetic": {"n_train": 192, "n_dev": 32}},
        loss={"name": "poly1"},
    )
    lab = tmp_path / "my_lab"  # the plugin: outside the repository
    lab.mkdir()
    plugin = lab / "poly1_cluster.py"
    plugin.write_text(poly1_source("poly1"))
    started = time.monotonic()
    args = ["sweep", str(config), "--plugin", str(plugin), "--address", ray_cluster.address]
    args += ["--tracking-uri", mlflow_server]
    driver = sweep_tools.start(args, tmp_path)
    most: dict[str, int] = {}  # the most reservations held at once, per node, at the moment of the most
    try:
        while driver.popen.poll() is None and time.monotonic() - started < 500:
            held = reservations(ray_cluster, sweep_tools, states=("CREATED",))
            if sum(held.values()) > sum(most.values()):
                most = held
            time.sleep(2)
        assert driver.popen.poll() is not None, "the sweep did not end in 500 s"
    finally:
        driver.stop()
    seconds = time.monotonic() - started
    log = driver.log.read_text()
    assert driver.popen.returncode == 0, log
    assert f"{TRIALS} completed" in log

    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-gpu-packing")
    runs = list(sweep_tools.by_trial(parents[0], trials).values())
    assert len(runs) == TRIALS
    # the plugin's loss, in the version the driver sent, on every trial (both nodes: asserted below)
    assert {run.data.params["loss.name"] for run in runs} == {"poly1"}
    fingerprint = f"poly1_cluster={digest_of(plugin)}"
    assert {run.data.tags.get("dicelab.plugins") for run in [*parents, *runs]} == {fingerprint}

    # Ray reserved the trials' bundles 4 per node, all 8 at once: both declared GPUs packed to capacity.
    reserved = reservations(ray_cluster, sweep_tools)
    assert reserved == dict.fromkeys(ray_cluster.node_ids, PER_GPU), reserved
    assert most == dict.fromkeys(ray_cluster.node_ids, PER_GPU), most

    # Each run's tags say where it ran, and the nodes' own logs agree: its worker process was one of that
    # node's Ray workers. Ray gave it GPU 0 (each node declares one GPU).
    node_of_pid = worker_pids(ray_cluster)
    for run in runs:
        tags = run.data.tags
        assert tags[GPU_IDS] == "0", tags
        assert node_of_pid.get(int(tags[WORKER_PID])) == tags[RAY_NODE], (tags, node_of_pid)
    addresses: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        addresses[run.data.tags[RAY_NODE]].add(run.data.tags[NODE_IP])
    assert all(len(found) == 1 and "" not in found for found in addresses.values()), addresses

    # Packed: 4 trials at once on a GPU, never more on one.
    per_gpu: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in runs:
        per_gpu[(run.data.tags[RAY_NODE], run.data.tags[GPU_IDS])].append(run)
    overlaps = {node: max_overlap(group) for (node, _), group in per_gpu.items()}
    trials_on = Counter(run.data.tags[RAY_NODE] for run in runs)
    processes_on = {
        node: len({run.data.tags[WORKER_PID] for run in group}) for (node, _), group in per_gpu.items()
    }
    names_of = dict(zip(ray_cluster.node_ids, ("head", "worker"), strict=True))
    print(
        f"gpu packing: sweep {seconds:.0f} s; reserved per node {_named(reserved, names_of)}; "
        f"trials per node {_named(trials_on, names_of)} in {_named(processes_on, names_of)} actor "
        f"processes; most at once per GPU {_named(overlaps, names_of)}, in the cluster {max_overlap(runs)}"
    )
    # Each trial ran on the GPU reserved for it: 4 on each node's, in an actor process of its own.
    assert trials_on == dict.fromkeys(ray_cluster.node_ids, PER_GPU), trials_on
    assert processes_on == {node: PER_GPU for node in ray_cluster.node_ids}, processes_on
    assert max(overlaps.values()) <= PER_GPU, overlaps

    # CUDA cannot see the declared GPU: each trial trained on CPU and said so, once.
    for run in runs:
        fallback = run.data.tags[names.DEVICE_FALLBACK]
        assert "\n" not in fallback and "CPU" in fallback.upper(), fallback
        assert run.data.params["train.num_threads"] == "1"  # a quarter CPU: one torch thread

    # The reservation is charged: GPU-seconds = 0.25 x wall seconds; no peak memory without CUDA.
    for run in runs:
        metrics = run.data.metrics
        assert metrics[names.COST_GPU_SECONDS] == pytest.approx(SHARE * metrics[names.COST_WALL_SECONDS])
        assert names.GPU_PEAK_MEMORY_MB not in metrics
    parent = parents[0].data.metrics
    gpu_seconds = sum(run.data.metrics[names.COST_GPU_SECONDS] for run in runs)
    cpu_seconds = sum(run.data.metrics[names.COST_CPU_SECONDS] for run in runs)
    assert parent[COST_TRIALS] == TRIALS
    assert parent[COST_GPU_HOURS] == pytest.approx(gpu_seconds / 3600)
    assert parent[COST_CPU_HOURS] == pytest.approx(cpu_seconds / 3600)


def reservations(
    cluster: Any,
    tools: Any,
    shape: dict[str, float] | None = None,
    job_id: str | None = None,
    states: tuple[str, ...] | None = None,
) -> dict[str, int]:
    """Node id -> how many trial reservations (single-bundle placement groups, {CPU: 0.25, GPU: 0.25} by
    default) Ray placed there, as Ray's state API lists them (`ray list placement-groups --detail`; removed
    ones included unless `states` says which): those of one Ray job (`job_id`), or of that shape (only the
    packing test's trials reserve the default one on the shared cluster)."""
    placed: Counter[str] = Counter()
    wanted = {"CPU": SHARE, "GPU": SHARE} if shape is None and job_id is None else shape
    for group in tools.state_list(cluster.dashboard, "placement_groups", tools.env, detail="True"):
        if job_id is not None and group["creator_job_id"] != job_id:
            continue
        if states is not None and group["state"] not in states:
            continue
        for bundle in group["bundles"]:
            # a group removed before Ray placed it lists its bundle without a node
            if bundle.get("node_id") and (wanted is None or bundle["unit_resources"] == wanted):
                placed[bundle["node_id"]] += 1
    return dict(placed)


def job_of(cluster: Any, tools: Any, driver_pid: int) -> str:
    """The Ray job id of the driver process `driver_pid` (a `dicelab sweep --address` joins as a job)."""
    for job in tools.state_list(cluster.dashboard, "jobs", tools.env):
        info = job.get("driver_info") or {}
        if str(info.get("pid")) == str(driver_pid):
            return job["job_id"]
    raise AssertionError(f"no Ray job of driver pid {driver_pid}")


def worker_pids(cluster: Any) -> dict[int, str]:
    """Worker process id -> the node id whose Ray logs have that worker's log file
    (`worker-<id>-<job>-<pid>.out` in the node's temp dir: the head's is ray/, the worker's ray-worker/;
    a cluster started again by the tests has directories of its own)."""
    directory = cluster.nodes[0].log.parent
    found: dict[int, str] = {}
    for node_id, temp in zip(cluster.node_ids, ("ray", "ray-worker"), strict=True):
        for log in (directory / temp).glob("session_*/logs/worker-*.out"):
            found[int(log.stem.rsplit("-", 1)[1])] = node_id
    return found


def _named(values: dict[str, Any], names_of: dict[str, str]) -> str:
    return ", ".join(f"{names_of.get(node, node[:8])} {value}" for node, value in sorted(values.items()))


# -- preflight ---------------------------------------------------------------------------------------------
# The preflight against a real two-node Ray cluster on 127.0.0.1 (token authentication): the versions it
# reports through its GCS (`dicelab sweep --address`) and its dashboard (`dicelab submit`) are the driver's; a
# driver of another version gets one line naming both; a wrong token is one line, exit 2, before anything is
# logged.


# Ray's C++ client reads the token once per process, so the driver's side runs in a fresh process of its own
# (this test process may already have met another cluster's token in an earlier test of its worker).
DRIVER = """
import json, sys
from ray.job_submission import JobSubmissionClient
from dicelab.sweeps import ray_adapter
address, dashboard = sys.argv[1:3]
reported = ray_adapter.cluster_versions(address)
ray_adapter.check_cluster(address)  # the same versions: no error
client = JobSubmissionClient(dashboard)
board = ray_adapter.dashboard_versions(client, dashboard)
ray_adapter.check_dashboard(client, dashboard)
driver = ray_adapter.driver_versions()
print(json.dumps([[v.ray, v.python] for v in (driver, reported, board)]))
"""


def test_the_cluster_reports_the_drivers_versions_and_another_driver_gets_one_line(ray_cluster, ray_env):
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update({key: value for key, value in ray_env.items() if key.startswith("RAY_")})
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, ray_cluster.address, ray_cluster.dashboard],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    driver, reported, board = (Versions(*found) for found in json.loads(done.stdout.strip().splitlines()[-1]))
    assert reported == driver == board
    assert driver == ray_adapter.driver_versions()

    # a driver of the next Ray release, and one on another Python, against what the cluster reported
    where = f"--address {ray_cluster.address}"
    newer = Versions("2.61.0", reported.python)
    line = ray_adapter.version_mismatch(reported, newer, where)
    assert line is not None and "\n" not in line
    assert line.startswith(
        f"{where}: the cluster runs Ray {reported.ray} on Python {reported.python}, "
        f"this driver Ray 2.61.0 on Python {reported.python}:"
    )
    other_python = Versions(reported.ray, "3.99.0")
    assert f"this driver Ray {reported.ray} on Python 3.99.0" in str(
        ray_adapter.version_mismatch(reported, other_python, where)
    )
    assert ClusterMismatch(line).exit_code == 2


def test_a_wrong_token_is_one_line_exit_2_and_nothing_is_logged(ray_cluster, sweep_tools, tmp_path: Path):
    config = sweep_tools.write_sweep(tmp_path, "preflight", {"space": {"loss.name": {"grid": ["ce"]}}})
    wrong = tmp_path / "wrong_token"
    wrong.write_text(secrets.token_hex(32))
    env = {**sweep_tools.env, "RAY_AUTH_TOKEN_PATH": str(wrong)}
    store = tmp_path / "mlflow.db"
    done = sweep_tools.run(
        ["sweep", str(config), "--address", ray_cluster.address, "--tracking-uri", f"sqlite:///{store}"],
        tmp_path,
        timeout_s=180,
        env=env,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "token" in lines[0] and ray_cluster.address in lines[0], done.stderr
    assert not store.exists()  # nothing logged: not even the store was created

    submitted = sweep_tools.run(
        ["submit", str(config), "--address", ray_cluster.dashboard, "--no-tracking-check"],
        tmp_path,
        timeout_s=180,
        env=env,
    )
    assert submitted.returncode == 2, submitted.stdout + submitted.stderr
    lines = [line for line in submitted.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "token" in lines[0], submitted.stderr
