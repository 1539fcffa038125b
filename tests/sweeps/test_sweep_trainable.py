"""The Tune trainable's checkpoint handling, without a running Tune."""

from __future__ import annotations

from pathlib import Path

import torch
from ray import tune

from dicelab.sweeps import trainable
from dicelab.training.reporter import Evaluation


def test_a_trial_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    torch.save({"progress": {"step": 7}}, tmp_path / trainable.STATE_FILE)
    monkeypatch.setattr(tune, "get_checkpoint", lambda: tune.Checkpoint.from_directory(str(tmp_path)))
    assert trainable._restored_state() == {"progress": {"step": 7}}


def test_a_checkpoint_deleted_under_a_killed_driver_starts_the_trial_over(tmp_path, monkeypatch):
    gone = tmp_path / "checkpoint_000001"  # Tune's saved state still names it; the directory is gone
    monkeypatch.setattr(tune, "get_checkpoint", lambda: tune.Checkpoint.from_directory(str(gone)))
    assert trainable._restored_state() is None


def test_no_checkpoint_no_state(monkeypatch):
    monkeypatch.setattr(tune, "get_checkpoint", lambda: None)
    assert trainable._restored_state() is None


def _evaluation(step: int) -> Evaluation:
    return Evaluation(step, float(step), {"f1": 0.5}, False, lambda: {"progress": {"step": step}})


def test_evaluations_carry_a_checkpoint_once_the_interval_has_passed(monkeypatch):
    clock = [100.0]
    reports: list[tuple[int, dict | None]] = []

    def report(result, checkpoint=None):
        state = None
        if checkpoint is not None:  # read now: the reporter's directory is gone after report returns
            with checkpoint.as_directory() as directory:
                state = torch.load(Path(directory) / trainable.STATE_FILE, weights_only=True)
        reports.append((result["step"], state))

    monkeypatch.setattr(trainable.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(tune, "report", report)
    reporter = trainable.TuneReporter(checkpoint_interval_s=10.0)
    for step, seconds in [(1, 4.0), (2, 4.0), (3, 4.0), (4, 4.0), (5, 11.0)]:
        clock[0] += seconds  # the training time before this evaluation
        reporter.on_evaluation(_evaluation(step))
    # 4 s and 8 s after the start: metrics only; 12 s: a checkpoint; 4 s after it: none; 15 s after: one
    assert reports == [
        (1, None),
        (2, None),
        (3, {"progress": {"step": 3}}),
        (4, None),
        (5, {"progress": {"step": 5}}),
    ]


def test_an_interval_of_zero_checkpoints_every_evaluation(monkeypatch):
    checkpoints = []
    monkeypatch.setattr(tune, "report", lambda result, checkpoint=None: checkpoints.append(checkpoint))
    reporter = trainable.TuneReporter(checkpoint_interval_s=0.0)
    for step in (1, 2, 3):
        reporter.on_evaluation(_evaluation(step))
    assert all(checkpoint is not None for checkpoint in checkpoints) and len(checkpoints) == 3


def _tune_last_result(results: list[dict]) -> dict:
    """What Tune holds as a trial's last result: its last report, with the reports counted."""
    return {**results[-1], "training_iteration": len(results)} if results else {}


def test_the_closing_result_of_a_failed_trial_is_not_counted_as_an_evaluation(monkeypatch):
    """The sweep's table shows `evaluations`: a trial that failed for good (non-finite, asking for CUDA on a
    CPU node) ends with one more report than it evaluated."""
    results: list[dict] = []
    monkeypatch.setattr(tune, "report", lambda result, checkpoint=None: results.append(result))
    reporter = trainable.TuneReporter(checkpoint_interval_s=1e9)
    assert trainable.evaluations(_tune_last_result(results)) is None  # no result yet
    trainable.TuneReporter.report_failure("dev_f1", "run-1")  # failed before its first evaluation
    assert trainable.evaluations(_tune_last_result(results)) == 0
    results.clear()
    for step in (1, 2):
        reporter.on_evaluation(_evaluation(step))
    assert trainable.evaluations(_tune_last_result(results)) == 2  # a trial that goes on, or completed
    trainable.TuneReporter.report_failure("dev_f1", "run-1")  # then non-finite
    last = _tune_last_result(results)
    assert trainable.evaluations(last) == 2 and last["dev_f1"] != last["dev_f1"]  # NaN: no value


def test_every_result_names_the_trials_run_for_the_driver_to_read_by_id(monkeypatch):
    results: list[dict] = []
    monkeypatch.setattr(tune, "report", lambda result, checkpoint=None: results.append(result))
    reporter = trainable.TuneReporter(checkpoint_interval_s=0.0, run_id="run-7")
    reporter.on_evaluation(_evaluation(1))  # with a checkpoint
    reporter.checkpoint_interval_s = 1e9
    reporter.on_evaluation(_evaluation(2))  # metrics only
    trainable.TuneReporter.report_failure("dev_f1", "run-7")
    assert [result[trainable.RUN_ID_RESULT] for result in results] == ["run-7"] * 3


def test_a_run_name_shows_sampled_floats_to_six_significant_digits():
    """A random or Optuna draw is a long float; its run name shows it as the analysis does."""
    point = {
        "loss.name": "focal",
        "loss.gamma": 2.533175598000681,
        "train.seed": 1,
        "train.learning_rate": 2e-05,
    }
    assert trainable.run_name(point) == "focal gamma=2.53318 learning_rate=2e-05 seed=1"
    assert (
        trainable.run_name({"loss.alpha": 0.3, "data.variant": "+positive"}) == "alpha=0.3 variant=+positive"
    )
