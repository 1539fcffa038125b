"""The trial loop on a tiny tiny-bert: every task family with several losses, determinism, resuming,
early stopping, stop requests and non-finite losses."""

from __future__ import annotations

import io
import math
import pickle
import re

import pytest
import torch

from dicelab.errors import ConfigError, TrialFailed
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import State
from dicelab.training import Evaluation, Reporter, TrialResult, inputs_key, run_trial
from dicelab.training.reporter import TrialStopped


class Recorder(Reporter):
    """Keeps every hook call, to check what the loop reported and in which order."""

    def __init__(self, stop_after_steps: int | None = None):
        self.calls: list[str] = []
        self.info: dict = {}
        self.steps: list[tuple[int, dict]] = []
        self.evaluations: list[Evaluation] = []
        self.states: dict[int, dict] = {}
        self.result: TrialResult | None = None
        self.stop_after_steps = stop_after_steps

    def on_start(self, config, info):
        self.calls.append("start")
        self.info = info

    def on_step(self, step, metrics):
        self.calls.append("step")
        self.steps.append((step, metrics))

    def on_evaluation(self, evaluation):
        self.calls.append("evaluation")
        self.evaluations.append(evaluation)
        self.states[evaluation.step] = evaluation.state()

    def should_stop(self):
        return (
            self.stop_after_steps is not None
            and bool(self.steps)
            and self.steps[-1][0] >= self.stop_after_steps
        )

    def on_end(self, result):
        self.calls.append("end")
        self.result = result


LOOP_CASES = [
    ("pairs", "ce"),
    ("pairs", "dice"),
    ("pairs", "dsc"),
    ("pairs", "wce"),
    ("tagging", "ce"),
    ("tagging", "dsc"),
    ("spans", "ce"),
    ("spans", "dice"),
]


@pytest.mark.parametrize(("family", "loss"), LOOP_CASES)
def test_trial_trains_and_evaluates_each_task_with_each_loss(family, loss, make_config, inputs_for):
    config = make_config(family, f"loss.name={loss}", "train.eval_every_steps=5")
    inputs = inputs_for(config)
    recorder = Recorder()

    result = run_trial(config, recorder, inputs=inputs)

    steps_per_epoch = math.ceil(len(inputs.train_features) / config.train.batch_size)
    assert result.outcome == names.COMPLETED and result.reason is None
    assert result.steps == steps_per_epoch
    assert recorder.calls[0] == "start" and recorder.calls[-1] == "end" and recorder.calls.count("end") == 1
    assert [e.step for e in recorder.evaluations] == [*range(5, steps_per_epoch, 5), steps_per_epoch]
    assert result.metric == "f1" and result.metric in result.final_metrics
    for value in [*result.final_metrics.values(), *result.best_metrics.values()]:
        assert math.isfinite(value) and 0.0 <= value <= 1.0
    assert result.best_metrics[result.metric] == max(e.metrics[result.metric] for e in recorder.evaluations)
    assert result.best_step in [e.step for e in recorder.evaluations]
    for evaluation in recorder.evaluations:
        assert (
            math.isfinite(evaluation.metrics[names.TRAIN_LOSS]) and evaluation.metrics[names.TRAIN_LOSS] > 0
        )
        assert evaluation.train_metrics[names.SAMPLES_PER_SECOND] > 0
        assert evaluation.train_metrics[names.LEARNING_RATE] >= 0
    assert result.best_eval_result is not None and result.best_eval_result.predictions
    assert set(result.best_model_state) == set(recorder.states[result.steps]["model"])


def test_training_reduces_the_loss(make_config, inputs_for):
    config = make_config("tagging", "train.epochs=3", "train.eval_every_steps=10", "train.learning_rate=3e-3")
    recorder = Recorder()
    run_trial(config, recorder, inputs=inputs_for(config))
    losses = [e.metrics[names.TRAIN_LOSS] for e in recorder.evaluations]
    assert losses[-1] < 0.7 * losses[0]


def test_same_seed_gives_identical_results_on_cpu(make_config, inputs_for):
    config = make_config("pairs", "loss.name=dsc", "train.max_steps=6", "train.eval_every_steps=3")
    first = run_trial(config, inputs=inputs_for(config))
    second = run_trial(config, inputs=inputs_for(config))
    assert first.final_metrics == second.final_metrics and first.best_metrics == second.best_metrics
    for name, tensor in first.best_model_state.items():
        assert torch.equal(tensor, second.best_model_state[name]), name

    other_seed = run_trial(make_config("pairs", "loss.name=dsc", "train.max_steps=6", "train.seed=7"))
    assert any(
        not torch.equal(tensor, other_seed.best_model_state[name])
        for name, tensor in first.best_model_state.items()
    )


def test_resume_from_an_evaluation_state_continues_exactly(make_config, inputs_for):
    # 10 batches per epoch in steps of 3, 3, 3 and 1 batches: resuming at step 6 starts mid-epoch and the
    # rest crosses an epoch boundary and a short accumulation.
    config = make_config(
        "pairs",
        "train.grad_accum_steps=3",
        "train.max_steps=12",
        "train.eval_every_steps=3",
        "model.dropout=0.2",
    )
    inputs = inputs_for(config)
    uninterrupted = Recorder()
    expected = run_trial(config, uninterrupted, inputs=inputs)
    assert [e.step for e in uninterrupted.evaluations] == [3, 6, 9, 12]

    buffer = io.BytesIO()
    torch.save(uninterrupted.states[6], buffer)  # a checkpoint is plain values and tensors
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    resumed = Recorder()
    result = run_trial(config, resumed, inputs=inputs, resume_state=state)

    assert resumed.info["start_step"] == 6
    assert [e.step for e in resumed.evaluations] == [9, 12]
    assert [e.metrics for e in resumed.evaluations] == [e.metrics for e in uninterrupted.evaluations[2:]]
    assert result.final_metrics == expected.final_metrics and result.best_metrics == expected.best_metrics
    assert (result.steps, result.best_step) == (expected.steps, expected.best_step)
    for name, tensor in uninterrupted.states[12]["model"].items():
        assert torch.equal(tensor, resumed.states[12]["model"][name]), name


def test_resume_state_from_other_data_is_refused(make_config, inputs_for):
    config = make_config("pairs", "train.max_steps=2")
    recorder = Recorder()
    run_trial(config, recorder, inputs=inputs_for(config))
    other = make_config("pairs", "train.max_steps=2", "data.max_length=32")
    with pytest.raises(ConfigError, match="resume_state"):
        run_trial(other, resume_state=recorder.states[2])


def test_early_stopping_after_patience_evaluations_without_improvement(make_config, inputs_for):
    # A learning rate this small cannot move the dev metric: every evaluation after the first is no better.
    config = make_config(
        "pairs", "train.learning_rate=1e-12", "train.eval_every_steps=1", "train.early_stopping_patience=2"
    )
    recorder = Recorder()
    result = run_trial(config, recorder, inputs=inputs_for(config))
    assert result.outcome == names.EARLY_STOPPED
    assert result.steps == 3 and result.best_step == 1
    assert re.fullmatch(
        r"no improvement of dev_f1 in 2 evaluations \(best [0-9.]+ at step 1\)", result.reason
    )
    assert recorder.result is result


def test_a_reporter_can_stop_the_trial(make_config, inputs_for):
    config = make_config("pairs")
    recorder = Recorder(stop_after_steps=4)
    result = run_trial(config, recorder, inputs=inputs_for(config))
    assert result.outcome == names.EARLY_STOPPED and result.steps == 4
    assert result.reason == "stopped on request at step 4"


def test_a_trial_its_scheduler_stopped_ends_as_scheduler_stopped_never_failed(make_config, inputs_for):
    # As Tune's report does when ASHA stops the trial: the reporter raises TrialStopped inside on_evaluation.
    class StoppedAtSecondEvaluation(Recorder):
        def on_evaluation(self, evaluation):
            super().on_evaluation(evaluation)
            if len(self.evaluations) == 2:
                raise TrialStopped("stopped by Tune's scheduler at step 4")

    config = make_config("pairs", "train.eval_every_steps=2", "train.max_steps=8")
    recorder = StoppedAtSecondEvaluation()
    with pytest.raises(TrialStopped):
        run_trial(config, recorder, inputs=inputs_for(config))
    result = recorder.result
    assert result is not None and recorder.calls[-1] == "end"
    assert result.outcome == State.SCHEDULER_STOPPED and result.outcome != names.FAILED
    assert result.reason == "stopped by Tune's scheduler at step 4" and result.steps == 4


def test_a_ctrl_c_ends_the_trial_as_interrupted_and_is_raised(make_config, inputs_for):
    class CtrlCAtFirstEvaluation(Recorder):
        def on_evaluation(self, evaluation):
            super().on_evaluation(evaluation)
            raise KeyboardInterrupt

    config = make_config("pairs", "train.eval_every_steps=2", "train.max_steps=8")
    recorder = CtrlCAtFirstEvaluation()
    with pytest.raises(KeyboardInterrupt):
        run_trial(config, recorder, inputs=inputs_for(config))
    assert recorder.result is not None and recorder.result.outcome == State.INTERRUPTED
    assert re.fullmatch(r"interrupted at step 2 \(epoch [0-9.]+\)", recorder.result.reason)


def test_non_finite_loss_stops_at_once_and_raises(make_config, inputs_for):
    config = make_config("pairs", "train.learning_rate=1e30", "train.warmup_ratio=0")
    recorder = Recorder()
    with pytest.raises(TrialFailed) as failure:
        run_trial(config, recorder, inputs=inputs_for(config))
    reason = failure.value.reason
    assert re.fullmatch(
        r"non-finite (loss|gradient norm) \((nan|inf)\) at step \d+ \(epoch \d\.\d\d\)", reason
    )
    assert recorder.result.outcome == names.NON_FINITE and recorder.result.reason == reason
    assert recorder.result.steps < 10 and recorder.calls[-1] == "end"


def test_other_exceptions_are_recorded_then_reraised(make_config, inputs_for, monkeypatch):
    # the config's metric is valid at validation; the trial's evaluation then logs no such metric
    config = make_config("pairs", "train.max_steps=2")
    monkeypatch.setattr(config.train, "metric", "no_such_metric")
    recorder = Recorder()
    with pytest.raises(ConfigError, match=r"train\.metric: 'no_such_metric'"):
        run_trial(config, recorder, inputs=inputs_for(config))
    assert recorder.result.outcome == names.FAILED
    assert recorder.result.reason.startswith("ConfigError: train.metric")


def test_inputs_key_covers_exactly_the_fields_that_change_inputs(make_config):
    key = inputs_key(make_config("pairs"))
    same_inputs = ["loss.name=dsc", "train.learning_rate=1", "train.seed=3", "model.dropout=0.3"]
    same_inputs.append("data.cache_dir=elsewhere")
    for same in same_inputs:
        assert inputs_key(make_config("pairs", same)) == key, same
    other_inputs = ["data.max_length=32", "data.synthetic.seed=2", "task.doc_stride=8", "model.backbone=x"]
    for other in other_inputs:
        assert inputs_key(make_config("pairs", other)) != key, other


def test_inputs_are_reused_only_for_the_same_data(make_config, inputs_for):
    config = make_config("pairs", "train.max_steps=2")
    inputs = inputs_for(config)
    with pytest.raises(ConfigError, match="different data"):
        run_trial(make_config("pairs", "data.synthetic.n_train=100"), inputs=inputs)


def test_inputs_pickle_small_and_work_after_unpickling(make_config, inputs_for):
    config = make_config("pairs", "train.max_steps=3")
    inputs = inputs_for(config)
    payload = pickle.dumps(inputs)
    frame_size = len(pickle.dumps(inputs.dev_frame))
    assert len(payload) < frame_size + 20_000  # features and tokenizer travel as file references
    restored = pickle.loads(payload)
    assert run_trial(config, inputs=restored).final_metrics == run_trial(config, inputs=inputs).final_metrics


@pytest.mark.parametrize("mode", ["min", "max"])
def test_the_best_evaluation_follows_train_mode(make_config, inputs_for, mode):
    config = make_config("pairs", "train.metric=log_loss", f"train.mode={mode}", "train.eval_every_steps=2")
    recorder = Recorder()
    result = run_trial(config, recorder, inputs=inputs_for(config))
    losses = [evaluation.metrics["log_loss"] for evaluation in recorder.evaluations]
    assert len(set(losses)) > 1
    assert result.best_metrics["log_loss"] == (min(losses) if mode == "min" else max(losses))
    best = next(e for e in recorder.evaluations if e.metrics["log_loss"] == result.best_metrics["log_loss"])
    assert result.best_step == best.step
