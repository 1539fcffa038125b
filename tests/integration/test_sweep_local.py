"""A sweep on a private local Ray with the embedded SQLite store (the `make demo` path), under ASHA: trials
the scheduler stops cannot end their own MLflow runs, so the driver does, as early-stopped."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# The interrupted sweep's trials: long enough to be running when Ctrl-C comes (it comes after a trial's first
# evaluation), short enough that the resume costs little.
INTERRUPTED_EPOCHS = 16

# A running trial's evaluations, read from the SQLite store's tables: a look through MlflowClient takes
# seconds on a loaded machine, long enough for the trial to train to its end before Ctrl-C comes.
_RUNNING_EVALUATIONS = """
    SELECT COUNT(*) FROM metrics JOIN runs ON metrics.run_uuid = runs.run_uuid
    JOIN experiments ON runs.experiment_id = experiments.experiment_id
    WHERE experiments.name = ? AND runs.status = 'RUNNING' AND metrics.key = 'dev_f1'"""


def running_evaluations(database: Path, experiment: str) -> int:
    """dev_f1 points of the experiment's running runs; 0 while the store or its tables do not exist yet."""
    if not database.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1)) as db:
            return int(db.execute(_RUNNING_EVALUATIONS, (experiment,)).fetchone()[0])
    except sqlite3.OperationalError:  # no tables yet, or the driver holds a write lock
        return 0


@pytest.fixture(scope="module")
def asha_sweep(tmp_path_factory, sweep_tools):
    """One ASHA sweep for the two ASHA tests (a sweep's driver, Ray and trial worker cost the same for one
    trial or four): three trials of four epochs under a budget of one evaluation, so ASHA stops each after
    its first epoch, and one of a single epoch, whose last evaluation is also where ASHA stops it."""
    directory = tmp_path_factory.mktemp("asha")
    config = sweep_tools.write_sweep(
        directory,
        "it-asha",
        {
            "space": {"loss.name": {"grid": ["ce", "dice", "focal", "tversky"]}},
            "conditional": {
                "tversky": {
                    "space": {"train.epochs": {"grid": [1]}, "tracking.log_predictions": {"grid": [True]}}
                }
            },
            "scheduler": {"name": "asha", "grace_period": 1, "max_t": 1},
            "max_concurrent": 1,  # each next trial reuses the worker of the one ASHA just stopped
        },
        train={"epochs": 4},
        # a held-out test split: dev carved from the synthetic train split, whose dev split is the test
        data={"splits": {"train": "train", "dev": {"carve_from": "train", "fraction": 0.25}, "test": "dev"}},
    )
    done = sweep_tools.run(["sweep", str(config)], directory, timeout_s=500)
    assert done.returncode == 0, done.stdout + done.stderr
    uri = f"sqlite:///{directory / '.dicelab' / 'mlflow.db'}"
    parents, trials = sweep_tools.sweep_runs(uri, "it-asha")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    runs = sweep_tools.by_trial(parents[0], trials)
    assert len(runs) == 4
    by_loss = {run.data.params["loss.name"]: run for run in runs.values()}
    return done, uri, by_loss


def test_asha_stopped_trials_are_finished_runs_with_outcome_early_stopped(asha_sweep):
    done, uri, by_loss = asha_sweep
    assert "3 early_stopped" in done.stdout
    client = MlflowClient(uri)
    for loss in ("ce", "dice", "focal"):
        run = by_loss[loss]
        assert run.info.status == "FINISHED"
        assert run.data.tags[names.OUTCOME] == names.EARLY_STOPPED
        assert "stopped" in run.data.tags[names.REASON]
        assert "best_dev_f1" in run.data.metrics and "best_step" in run.data.metrics
        assert [a.path for a in client.list_artifacts(run.info.run_id)] == [names.CONFIG_ARTIFACT]
        assert len(client.get_metric_history(run.info.run_id, "dev_f1")) == 1  # nothing after the stop
        assert not [key for key in run.data.metrics if key.startswith("test_")]  # it never reached its end


def test_under_asha_a_trial_that_trains_to_the_end_is_completed_not_stopped(asha_sweep):
    done, uri, by_loss = asha_sweep
    assert "1 completed" in done.stdout
    run = by_loss["tversky"]  # one epoch, max_t 1: ASHA stops it at its last evaluation too
    assert run.info.status == "FINISHED" and run.data.tags[names.OUTCOME] == names.COMPLETED
    assert names.REASON not in run.data.tags
    artifacts = {a.path for a in MlflowClient(uri).list_artifacts(run.info.run_id)}
    assert len(artifacts) > 1  # the trial's own end: config, predictions, per-class report
    # scored once on the held-out test split (32 pairs), with its dev-tuned threshold applied there
    metrics = run.data.metrics
    assert {"test_f1", "test_accuracy", "threshold", "best_dev_f1_tuned", "test_f1_tuned", "test_ece"} <= set(
        metrics
    )
    predictions = {a.path for a in MlflowClient(uri).list_artifacts(run.info.run_id, "predictions")}
    assert predictions == {names.PREDICTIONS_ARTIFACT, names.TEST_PREDICTIONS_ARTIFACT}


def test_ctrl_c_ends_the_running_trials_as_killed_and_resume_finishes_them(
    tmp_path, sweep_tools, fault_figure
):
    config = sweep_tools.write_sweep(
        tmp_path,
        "it-interrupt",
        {"space": {"loss.name": {"grid": ["ce", "dice"]}}, "max_concurrent": 1},
        train={"epochs": INTERRUPTED_EPOCHS},
    )
    database = tmp_path / ".dicelab" / "mlflow.db"
    uri = f"sqlite:///{database}"

    driver = sweep_tools.start(["sweep", str(config)], tmp_path)
    try:
        first = "a running trial's first evaluation"
        look = functools.partial(running_evaluations, database, "it-interrupt")
        sweep_tools.wait_until(look, 300, first, driver, every_s=0.2)
        os.kill(driver.popen.pid, signal.SIGINT)  # Ctrl-C in the driver's terminal
        assert driver.popen.wait(timeout=120) == 130, driver.log.read_text()[-3000:]
    finally:
        driver.stop()
    assert "--resume" in driver.log.read_text()

    parents, trials = sweep_tools.sweep_runs(uri, "it-interrupt")
    assert [parent.info.status for parent in parents] == ["KILLED"]
    assert trials and all(run.info.status != "RUNNING" for run in trials)  # nothing left looking alive
    killed = [run for run in trials if run.info.status == "KILLED"]
    ended = [(run.info.run_name, run.info.status, run.data.tags.get(names.OUTCOME)) for run in trials]
    assert killed and all("--resume" in run.data.tags[names.REASON] for run in killed), ended

    started = time.monotonic()
    resumed = sweep_tools.run(["sweep", str(config), "--resume"], tmp_path, 500)
    recover_s = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    parents, trials = sweep_tools.sweep_runs(uri, "it-interrupt")
    assert [parent.info.status for parent in parents] == ["FINISHED"]
    runs = sweep_tools.by_trial(parents[0], trials)
    assert len(runs) == 2 and all(run.info.status == "FINISHED" for run in runs.values())
    assert all(names.REASON not in run.data.tags for run in runs.values())
    client = MlflowClient(uri)  # after the driver made the store: see faults/test_fault_driver.py
    evaluated = [
        {p.step for p in client.get_metric_history(run.info.run_id, "dev_f1")} for run in runs.values()
    ]
    lost = sum(INTERRUPTED_EPOCHS - len(steps) for steps in evaluated)
    assert lost == 0
    fault_figure(
        "Ctrl-C (SIGINT) of the driver, then --resume",
        trials_finished=f"{len(runs)}/2",
        runs_duplicated=len(trials) - len(runs),
        evaluations_lost=lost,
        seconds_to_recover=f"{recover_s:.0f} (resume)",
    )


def test_a_registry_error_found_while_ray_starts_is_one_line_and_leaves_nothing(tmp_path, sweep_tools):
    """Ray starts beside the registry checks (see sweeps.driver): an unknown loss still ends the sweep with
    exit code 2 and one line, with no store or parent run created, and Ray is shut down."""
    # the loss is not swept: a --set of a swept key is refused before (check_overrides)
    space = {"space": {"train.learning_rate": {"grid": [1e-3]}}}
    config = sweep_tools.write_sweep(tmp_path, "it-bad-loss", space)
    done = sweep_tools.run(["sweep", str(config), "--set", "loss.name=cee"], tmp_path, timeout_s=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "config key 'loss.name': unknown loss 'cee'" in lines[0], done.stderr
    assert not (tmp_path / ".dicelab").exists()
