"""Precision: the auto / fp32 / bf16 / fp16 decision (pure, with a fake device capability) and the fp16
gradient-scaler path of the loop, run on CPU with torch's CPU GradScaler: skipped steps are counted, hold the
schedule, and too many in a row end the trial as non-finite."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from dicelab.config import TrainConfig
from dicelab.errors import ConfigError, TrialFailed
from dicelab.losses import build_loss
from dicelab.tracking import conventions as names
from dicelab.training import Reporter, run_trial
from dicelab.training import loop as loop_module
from dicelab.training.loop import MAX_CONSECUTIVE_SKIPS
from dicelab.training.runtime import autocast, gradient_scaler, resolve_precision, select_precision

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("asked", "device_type", "native_bf16", "expected"),
    [
        ("auto", "cuda", True, "bf16"),  # Ampere and later
        ("auto", "cuda", False, "fp16"),  # T4, V100: fp16 with a scaler
        ("auto", "cpu", False, "fp32"),
        ("fp32", "cuda", True, "fp32"),
        ("fp32", "cpu", False, "fp32"),
        ("bf16", "cuda", True, "bf16"),
        ("fp16", "cuda", True, "fp16"),
        ("fp16", "cuda", False, "fp16"),
    ],
)
def test_precision_decision(asked, device_type, native_bf16, expected):
    assert resolve_precision(asked, device_type, native_bf16) == expected


@pytest.mark.parametrize("asked", ["bf16", "fp16"])
def test_half_precision_on_cpu_is_a_one_line_config_error(asked):
    with pytest.raises(ConfigError, match=rf"^train\.precision: {asked} needs a CUDA device") as error:
        resolve_precision(asked, "cpu", False)
    assert "\n" not in str(error.value)


def test_bf16_on_a_gpu_without_native_bf16_is_a_config_error():
    with pytest.raises(ConfigError, match=r"^train\.precision: bf16 is not supported natively"):
        resolve_precision("bf16", "cuda", False)


def test_a_trial_that_fell_back_to_cpu_trains_in_fp32_whatever_it_asked():
    for asked in ("auto", "fp32", "bf16", "fp16"):
        assert resolve_precision(asked, "cpu", False, fell_back=True) == "fp32"
        assert select_precision(TrainConfig(precision=asked), CPU, fell_back=True) == "fp32"


def test_only_fp16_gets_a_gradient_scaler_and_half_precisions_autocast():
    assert gradient_scaler(CPU, "fp32") is None and gradient_scaler(CPU, "bf16") is None
    scaler = gradient_scaler(CPU, "fp16")
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled()
    layer = nn.Linear(4, 4)
    with autocast(CPU, "fp16"):
        assert layer(torch.ones(2, 4)).dtype == torch.float16
    with autocast(CPU, "fp32"):
        assert layer(torch.ones(2, 4)).dtype == torch.float32


class Steps(Reporter):
    def __init__(self) -> None:
        self.metrics: dict[int, dict[str, float]] = {}
        self.states: list[dict] = []
        self.result = None

    def on_step(self, step, metrics):
        self.metrics[step] = metrics

    def on_evaluation(self, evaluation):
        self.states.append(evaluation.state())

    def on_end(self, result):
        self.result = result


class InfGradients(nn.Module):
    """The real loss; on the training calls numbered in `steps` (1-based) its gradient becomes inf, so every
    parameter's gradient overflows while the loss value stays finite: what an fp16 overflow looks like."""

    def __init__(self, loss: nn.Module, steps: set[int] | None):
        super().__init__()
        self.loss, self.steps, self.calls = loss, steps, 0

    def forward(self, *args, **kwargs):
        value = self.loss(*args, **kwargs)
        if torch.is_grad_enabled():  # a training step, not an evaluation
            self.calls += 1
            if self.steps is None or self.calls in self.steps:
                value.register_hook(lambda grad: grad * float("inf"))
        return value


@pytest.fixture
def fp16_on_cpu(monkeypatch):
    """The loop in fp16 on CPU (autocast float16 and torch's CPU GradScaler); `inject(steps)` makes the
    gradients of those training steps (None: of every step) inf."""
    monkeypatch.setattr(loop_module, "select_precision", lambda *args, **kwargs: "fp16")

    def inject(steps: set[int] | None) -> None:
        def wrapped(*args, **kwargs):
            return InfGradients(build_loss(*args, **kwargs), steps)

        monkeypatch.setattr(loop_module, "build_loss", wrapped)

    return inject


def test_fp16_steps_with_overflowing_gradients_are_skipped_counted_and_hold_the_schedule(
    fp16_on_cpu, make_config, inputs_for
):
    fp16_on_cpu({3, 4, 5})
    config = make_config("pairs", "train.log_every_steps=1", "train.max_steps=8", "train.warmup_ratio=0.5")
    steps = Steps()
    result = run_trial(config, steps, inputs=inputs_for(config))

    assert result.outcome == names.COMPLETED and result.steps == 8
    counts = {step: metrics[names.SKIPPED_STEPS] for step, metrics in steps.metrics.items()}
    increments = {step for step in range(2, 9) if counts[step] > counts[step - 1]}
    assert {3, 4, 5} <= increments  # each injected step was skipped
    assert result.resource_metrics[names.SKIPPED_STEPS] == counts[8] >= 3
    rates = {step: metrics[names.LEARNING_RATE] for step, metrics in steps.metrics.items()}
    assert rates[5] == rates[4] == rates[3] == rates[2]  # skipped steps do not advance the warmup
    assert rates[6] > rates[5]
    assert all(torch.isfinite(tensor).all() for tensor in result.best_model_state.values())
    # the scaler's state is part of a checkpoint (weights_only-safe) and restores with it
    buffer = io.BytesIO()
    torch.save(steps.states[-1], buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert state["scaler"]["scale"] < 65536.0 and state["progress"]["skipped_steps"] == counts[8]


def test_a_scaler_that_keeps_skipping_ends_the_trial_as_non_finite(fp16_on_cpu, make_config, inputs_for):
    fp16_on_cpu(None)
    config = make_config("pairs", "train.epochs=3")  # 30 steps: more than MAX_CONSECUTIVE_SKIPS
    steps = Steps()
    with pytest.raises(TrialFailed) as failure:
        run_trial(config, steps, inputs=inputs_for(config))
    reason = failure.value.reason
    assert reason.startswith(f"the fp16 gradient scaler skipped {MAX_CONSECUTIVE_SKIPS} steps in a row")
    assert f"at step {MAX_CONSECUTIVE_SKIPS} (epoch 2.00)" in reason
    result = steps.result
    assert result.outcome == names.NON_FINITE and result.reason == reason
    assert result.steps == MAX_CONSECUTIVE_SKIPS - 1
    assert result.resource_metrics[names.SKIPPED_STEPS] == MAX_CONSECUTIVE_SKIPS


def test_without_a_scaler_an_overflowing_gradient_stops_the_trial_at_once(
    monkeypatch, make_config, inputs_for
):
    monkeypatch.setattr(
        loop_module, "build_loss", lambda *args, **kwargs: InfGradients(build_loss(*args, **kwargs), {2})
    )
    config = make_config("pairs", "train.max_steps=5")
    with pytest.raises(TrialFailed, match=r"^non-finite gradient norm \((inf|nan)\) at step 2 "):
        run_trial(config, inputs=inputs_for(config))


def test_a_resumed_fp16_trial_continues_with_the_scaler_where_it_was(fp16_on_cpu, make_config, inputs_for):
    injected = {3}  # one skip before the checkpoint at step 4: the restored scale is not the initial one
    fp16_on_cpu(injected)
    config = make_config("pairs", "train.max_steps=8", "train.eval_every_steps=4", "train.log_every_steps=1")
    inputs = inputs_for(config)
    uninterrupted = Steps()
    expected = run_trial(config, uninterrupted, inputs=inputs)
    checkpoint = uninterrupted.states[0]
    assert checkpoint["progress"]["step"] == 4 and checkpoint["scaler"]["scale"] < 65536.0

    injected.clear()  # the resumed run counts its loss calls from 1 again: no injection there
    resumed = Steps()
    result = run_trial(config, resumed, inputs=inputs, resume_state=checkpoint)

    assert result.final_metrics == expected.final_metrics
    assert result.resource_metrics[names.SKIPPED_STEPS] == expected.resource_metrics[names.SKIPPED_STEPS]
    assert resumed.states[-1]["scaler"] == uninterrupted.states[-1]["scaler"]
    for name, tensor in uninterrupted.states[-1]["model"].items():
        assert torch.equal(tensor, resumed.states[-1]["model"][name]), name
