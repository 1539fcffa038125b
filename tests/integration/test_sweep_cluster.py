"""Sweeps against real components: a two-node Ray cluster with token auth, `dicelab submit` to it, and an
MLflow server over HTTP. Each test reads back what the sweep recorded: the parent run, its nested children,
their params, metrics, statuses and reasons. A small seed race is killed mid-way and resumed: it continues
where it was, with no trial run twice and no run duplicated, and its decision and eliminations are recorded
on the parent run.

The nested runs and the failed, non-finite and crashed trials are one sweep's (a module fixture: a sweep's
driver and trial workers cost far more than its tiny trials). Every test here uses the session's cluster and
server (tests/integration/conftest.py): they are one module, so `pytest -n 2 --dist loadfile` runs them on
one worker, which starts that cluster and server once.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run

from dicelab.sweeps.race_records import DECISION_ARTIFACT, ELIMINATIONS_ARTIFACT
from dicelab.sweeps.trainable import RAY_NODE, RESTORED_FROM_STEP, WORKER_PID
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def mixed_sweep(tmp_path_factory, ray_cluster, mlflow_server, sweep_tools):
    """One sweep of 8 trials on the two-node cluster, for the two tests below (a sweep's driver and its trial
    workers cost far more than the tiny trials): per seed (1, 2) a normal trial, one whose learning rate
    overflows the weights (non-finite loss), one that asks for CUDA on a CPU-only cluster (raises), and a long
    one whose worker is killed mid-way (only the first found: retried from its last checkpoint).

    Returns (the driver's exit code, its log, the parent run, the trial runs by trial id)."""
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
                "focal": {"space": {"train.epochs": {"grid": [30]}}},
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
        )
        os.kill(int(focal.data.tags[WORKER_PID]), signal.SIGKILL)  # the trial's worker dies (same machine)
        driver.popen.wait(timeout=600)
    finally:
        driver.stop()
    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-cluster")
    assert len(parents) == 1, parents
    runs = sweep_tools.by_trial(parents[0], trials)  # the retried trial kept its one run
    return driver.popen.returncode, driver.log.read_text(), parents[0], runs


def test_sweep_on_a_two_node_cluster_records_nested_runs(mixed_sweep, mlflow_server):
    returncode, log, parent, runs = mixed_sweep
    assert returncode == 0, log
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
    returncode, log, parent, runs = mixed_sweep
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
            # a learning rate that learns against one that cannot: the race has something to find
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
