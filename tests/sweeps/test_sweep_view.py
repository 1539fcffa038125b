"""The sweep's table of trials (`SweepView`), from Tune's trials as the callbacks see them, without Ray:
a trial that failed for good shows the evaluations it made, no metric, and ranks below the trials with one."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from ray.tune.experiment import Trial
from rich.console import Console

from dicelab.experiment import experiment_from_dict
from dicelab.sweeps.algorithms import POINT_KEY
from dicelab.sweeps.callbacks import SweepView, TrialRecords
from dicelab.sweeps.space import plan_sweep
from dicelab.sweeps.trainable import FAILED_RESULT, SweepContext


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
