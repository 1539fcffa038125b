"""The sweep's table of trials (`SweepView`), from Tune's trials as the callbacks see them, without Ray:
a trial that failed for good shows the evaluations it made, no metric, and ranks below the trials with one."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace
from typing import Any

from mlflow import MlflowClient
from ray.tune.experiment import Trial
from rich.console import Console

from dicelab.experiment import experiment_from_dict
from dicelab.sweeps import records
from dicelab.sweeps.algorithms import POINT_KEY
from dicelab.sweeps.callbacks import SweepView, TrialRecords
from dicelab.sweeps.space import plan_sweep
from dicelab.sweeps.trainable import FAILED_RESULT, RUN_ID_RESULT, SweepContext
from dicelab.tracking import check_tracking
from dicelab.tracking import conventions as names


def _context() -> SweepContext:
    data = {
        "name": "view",
        "data": {"source": "synthetic_pairs"},
        "search": {"space": {"train.learning_rate": {"grid": [1.0e-3, 1.0e39]}}},
    }
    plan = plan_sweep(experiment_from_dict(data, "view.yaml"), "view.yaml")
    return SweepContext(plan, "view", "sweep-id", "parent-id", "0", "sqlite:///unused.db", "f1", 1.0)


def _trial(trial_id: str, rate: float, results: list[dict[str, Any]]) -> SimpleNamespace:
    """A finished trial as Tune holds it: its config and its last result, with the reports counted."""
    last = {**results[-1], "training_iteration": len(results)} if results else {}
    return SimpleNamespace(
        trial_id=trial_id,
        status=Trial.TERMINATED,
        config={POINT_KEY: {"train.learning_rate": rate}},
        last_result=last,
    )


def _rows(view: SweepView, trials: list[SimpleNamespace]) -> list[str]:
    console = Console(width=160, record=True)
    console.print(view.render(trials, 10, footer=False))
    return [line for line in console.export_text().splitlines() if line.startswith("│")]


def test_a_failed_trial_shows_its_evaluations_no_metric_and_ranks_last():
    context = _context()
    records = TrialRecords(context, "fifo")
    view = SweepView(context, records, "MLflow: nowhere")
    completed = _trial("t_completed", 1.0e-3, [{"dev_f1": 0.61}, {"dev_f1": 0.72}])
    diverged = _trial("t_nonfinite", 1.0e39, [{"dev_f1": 0.55}, {"dev_f1": math.nan, FAILED_RESULT: True}])
    refused = _trial("t_failed", 1.0e39, [{"dev_f1": math.nan, FAILED_RESULT: True}])
    for trial, results in (  # the results as Tune hands them to the callback, one report at a time
        (refused, [{"dev_f1": math.nan, FAILED_RESULT: True}]),
        (diverged, [{"dev_f1": 0.55}, {"dev_f1": math.nan, FAILED_RESULT: True}]),
        (completed, [{"dev_f1": 0.61}, {"dev_f1": 0.72}]),
    ):
        for result in results:
            view.on_trial_result(0, [], trial, result)
    records.outcomes.update(
        t_completed=("completed", None),
        t_nonfinite=("non_finite", "non-finite loss"),
        t_failed=("failed", "no CUDA"),
    )

    rows = _rows(view, [refused, diverged, completed])
    cells = [[cell.strip() for cell in row.strip("│").split("│")] for row in rows]
    by_trial = {row[0]: row for row in cells}
    # trial, status, learning_rate, evals, dev_f1 (the latest), best dev_f1
    assert by_trial["t_completed"][3:] == ["2", "0.7200", "0.7200"]
    assert by_trial["t_nonfinite"][3:] == ["1", "", "0.5500"]  # its NaN closing result is no evaluation
    assert by_trial["t_failed"][3:] == ["0", "", ""]  # refused before its first evaluation
    assert [row[0] for row in cells] == ["t_completed", "t_nonfinite", "t_failed"]  # best first


def test_after_a_resume_the_trials_that_ended_before_show_their_runs_best_and_rank_by_it(tmp_path):
    """A --resume's driver saw no result of the trials that had ended: their best comes from their runs'
    best_dev_<metric>, as their outcome does, so the table ranks them as the first driver's did."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    check_tracking(store)  # a copy of the cached empty schema, not MLflow's migrations
    client = MlflowClient(store)
    experiment_id = client.create_experiment("view")
    context = dataclasses.replace(_context(), experiment_id=experiment_id, tracking_uri=store)
    for trial_id, best in (("t_lower", 0.64), ("t_higher", 0.71)):
        run_id = records.create_trial_run(
            client, experiment_id, run_name=trial_id, parent_run_id="parent-id",
            tags=context.trial_tags(trial_id), params={},
        )  # fmt: skip
        client.log_metric(run_id, names.best_metric("f1"), best)
        client.log_metric(run_id, names.dev_metric("f1"), best - 0.05)
        client.set_tag(run_id, names.OUTCOME, names.COMPLETED)
        client.set_terminated(run_id, "FINISHED")
    trial_records = TrialRecords(context, "fifo")
    trial_records.setup()
    view = SweepView(context, trial_records, "MLflow: nowhere")
    lower = _trial("t_lower", 1.0e-3, [{"dev_f1": 0.59}])  # restored by Tune: its last result only
    higher = _trial("t_higher", 1.0e-3, [{"dev_f1": 0.66}])

    cells = [[cell.strip() for cell in row.strip("│").split("│")] for row in _rows(view, [lower, higher])]
    assert [(row[0], row[1], row[-1]) for row in cells] == [
        ("t_higher", "completed", "0.7100"),
        ("t_lower", "completed", "0.6400"),
    ]


def test_an_ended_trials_run_is_read_by_the_id_its_results_carry_else_found_by_its_tags(tmp_path):
    """The driver reads an ended trial's run by the id in its last result (one read, however many runs the
    sweep has); a trial that ended before reporting one is found by its tags."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    check_tracking(store)
    client = MlflowClient(store)
    experiment_id = client.create_experiment("view")
    context = dataclasses.replace(_context(), experiment_id=experiment_id, tracking_uri=store)
    run_ids = {}
    for trial_id in ("t_reported", "t_silent"):
        run_ids[trial_id] = records.create_trial_run(
            client, experiment_id, run_name=trial_id, parent_run_id="parent-id",
            tags=context.trial_tags(trial_id), params={},
        )  # fmt: skip
        client.set_tag(run_ids[trial_id], names.OUTCOME, names.COMPLETED)
        client.set_terminated(run_ids[trial_id], "FINISHED")
    trial_records = TrialRecords(context, "fifo")
    # no run carries this trial's tags: only its reported id leads to its run
    reported = _trial("t_renamed", 1.0e-3, [{"dev_f1": 0.7, RUN_ID_RESULT: run_ids["t_reported"]}])
    silent = _trial("t_silent", 1.0e-3, [])
    trial_records.on_trial_complete(0, [], reported)
    trial_records.on_trial_complete(0, [], silent)
    assert trial_records.outcomes == {"t_renamed": ("completed", None), "t_silent": ("completed", None)}
    assert trial_records._find(reported).info.run_id == run_ids["t_reported"]
    assert trial_records._find(silent).info.run_id == run_ids["t_silent"]
