"""Trials on a CUDA GPU: every task in every precision, the same losses as on CPU, resuming, the saved
model predicting on the GPU what the trial evaluated, and the speed switches (torch.compile with Inductor,
TF32, SDPA attention, fused AdamW) training the losses they train without.

These tests run where torch sees a CUDA device and are skipped elsewhere (the project's CI has none): run
`pytest tests/training/test_training_cuda.py tests/tasks/test_tasks_families.py` on a GPU machine
(docs/development.md, "Tests on a GPU"). They need no Ray or network, and only the pyfunc test needs MLflow.
"""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch._dynamo
from tests.tasks.test_tasks_families import _decisions

from dicelab.config import ExperimentConfig
from dicelab.models.bundle import BundleInfo, write_bundle
from dicelab.models.loading import load_model
from dicelab.models.saved import load_bundle
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import State
from dicelab.training import Evaluation, Reporter, TrialResult, run_trial

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# family of the training conftest's configs, and the task trained on it
TASK_CASES = [
    ("pairs", "pair_classification"),
    ("tagging", "token_tagging"),
    ("tagging", "mrc_ner"),
    ("spans", "span_extraction"),
]
# CPU and CUDA fp32 run different kernels: the same steps agree to float32 rounding, not bit for bit
FP32_TOLERANCE = 1e-3
# bf16 / fp16 autocast keeps 8 / 11 bits of mantissa in the encoder's matrix products
HALF_TOLERANCE = 5e-2
# TF32 matmuls keep fp32's range and 10 bits of mantissa: fp32 elsewhere
TF32_TOLERANCE = 1e-2
# "tf32" is fp32 with TF32 matmuls where the GPU has them; "fp32" turns them off (CPU fp32 is IEEE fp32)
PRECISIONS = {
    "fp32": ("train.precision=fp32", "train.tf32=false"),
    "tf32": ("train.precision=fp32", "train.tf32=true"),
    "bf16": ("train.precision=bf16",),
    "fp16": ("train.precision=fp16",),
}


class Losses(Reporter):
    """The training loss at every step and the resumable state at every evaluation."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.evaluations: list[Evaluation] = []
        self.states: dict[int, dict] = {}

    def on_step(self, step: int, metrics: dict[str, float]) -> None:
        if names.TRAIN_LOSS in metrics:
            self.losses.append(metrics[names.TRAIN_LOSS])

    def on_evaluation(self, evaluation: Evaluation) -> None:
        self.evaluations.append(evaluation)
        self.states[evaluation.step] = evaluation.state()

    def on_end(self, result: TrialResult) -> None:
        self.result = result


def _config(make_config, family: str, task_name: str, *overrides: str) -> ExperimentConfig:
    return make_config(
        family,
        f"task.name={task_name}",
        "train.max_steps=8",
        "train.eval_every_steps=4",
        "train.log_every_steps=1",
        "model.dropout=0.0",  # dropout draws differ between the CPU and CUDA generators
        *overrides,
    )


def _train(config: ExperimentConfig, inputs) -> tuple[TrialResult, Losses]:
    recorder = Losses()
    result = run_trial(config, recorder, inputs=inputs)
    return result, recorder


@pytest.mark.parametrize(("family", "task_name"), TASK_CASES)
@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_a_cuda_trial_follows_the_cpu_trial_of_the_same_seed(
    make_config, inputs_for, family, task_name, precision
):
    cpu_config = _config(make_config, family, task_name, "train.device=cpu")
    inputs = inputs_for(cpu_config)
    cpu, cpu_losses = _train(cpu_config, inputs)
    before = torch.cuda.memory_allocated()

    gpu_config = _config(make_config, family, task_name, "train.device=cuda", *PRECISIONS[precision])
    gpu, gpu_losses = _train(gpu_config, inputs)

    assert gpu.outcome == State.COMPLETED.value and gpu.steps == cpu.steps == 8
    assert all(math.isfinite(value) for value in gpu.best_metrics.values())
    tolerance = {"fp32": FP32_TOLERANCE, "tf32": TF32_TOLERANCE}.get(precision, HALF_TOLERANCE)
    skipped = int(gpu.resource_metrics.get(names.SKIPPED_STEPS, 0))
    assert skipped <= (1 if precision == "fp16" else 0)  # the scaler's first scale may overflow once
    # a step the fp16 scaler skipped logs its loss but does not update: compare the steps before it only
    compared = cpu_losses.losses if not skipped else cpu_losses.losses[:1]
    assert len(gpu_losses.losses) == len(cpu_losses.losses)
    for step, (on_cpu, on_gpu) in enumerate(zip(compared, gpu_losses.losses, strict=False), start=1):
        assert on_gpu == pytest.approx(on_cpu, rel=tolerance), (
            f"step {step}: {on_gpu} on CUDA, {on_cpu} on CPU"
        )
    assert gpu.resource_metrics[names.GPU_PEAK_MEMORY_MB] > 0
    assert torch.cuda.memory_allocated() == before  # the trial gave its memory back


def test_a_cuda_trial_resumes_where_it_stopped(make_config, inputs_for):
    """The CUDA generator is part of the state: dropout after resuming draws what it would have drawn."""
    config = make_config(
        "pairs",
        "train.device=cuda",
        "train.precision=fp32",
        "train.max_steps=12",
        "train.eval_every_steps=3",
        "train.grad_accum_steps=3",
        "model.dropout=0.2",
    )
    inputs = inputs_for(config)
    uninterrupted = Losses()
    expected = run_trial(config, uninterrupted, inputs=inputs)

    buffer = io.BytesIO()
    torch.save(uninterrupted.states[6], buffer)
    buffer.seek(0)
    resumed = Losses()
    result = run_trial(config, resumed, inputs=inputs, resume_state=torch.load(buffer, weights_only=True))

    assert [e.step for e in resumed.evaluations] == [9, 12]
    assert (result.steps, result.best_step) == (expected.steps, expected.best_step)
    # CUDA's atomic adds (embedding gradients) sum in no fixed order: equal to rounding, not bit for bit
    assert resumed.losses == pytest.approx(uninterrupted.losses[-len(resumed.losses) :], rel=1e-5)
    for name, tensor in uninterrupted.states[12]["model"].items():
        torch.testing.assert_close(resumed.states[12]["model"][name], tensor, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize(("family", "task_name"), TASK_CASES)
def test_the_saved_model_predicts_on_cuda_what_the_trial_evaluated(
    tmp_path, make_config, inputs_for, family, task_name
):
    """A trial trained and evaluated in fp32 on CUDA, saved, and loaded on CUDA and on CPU."""
    config = make_config(
        family, f"task.name={task_name}", "train.device=cuda", "train.precision=fp32", "train.max_steps=8"
    )
    inputs = inputs_for(config)
    result = run_trial(config, inputs=inputs)
    assert result.outcome == State.COMPLETED.value
    info = BundleInfo.of_trial(
        config, inputs.label_names, metrics=result.best_metrics, metric=result.metric, step=result.best_step
    )
    write_bundle(tmp_path / "bundle", config, info, inputs.tokenizer, result.best_model_state)
    expected = result.best_eval_result.predictions

    on_gpu = load_bundle(tmp_path / "bundle", device="cuda")
    assert next(on_gpu.model.parameters()).is_cuda
    assert _decisions(on_gpu.predict(inputs.dev_frame)) == _decisions(expected)
    on_cpu = load_bundle(tmp_path / "bundle", device="cpu")
    assert _decisions(on_cpu.predict(inputs.dev_frame)) == _decisions(expected)
    # the API's default, as `dicelab predict`'s and the pyfunc model's: the GPU where there is one
    assert next(load_model(tmp_path / "bundle").model.parameters()).is_cuda


def test_the_pyfunc_model_predicts_on_the_gpu_unless_told_otherwise(tmp_path, make_config, inputs_for):
    """`mlflow.pyfunc.load_model` on a GPU machine (as `mlflow models serve` loads it) puts the model on the
    GPU; model_config={"device": "cpu"} keeps it on the CPU; both predict what the trial evaluated."""
    pyfunc = pytest.importorskip("mlflow.pyfunc")
    from dicelab.models.publishing import save_model_dir

    config = make_config("pairs", "train.device=cuda", "train.precision=fp32", "train.max_steps=8")
    inputs = inputs_for(config)
    result = run_trial(config, inputs=inputs)
    directory = save_model_dir(
        tmp_path / "model", config, inputs.label_names, inputs.tokenizer_path, result.best_model_state
    )
    expected = _decisions(result.best_eval_result.predictions)
    for model_config, device in ((None, "cuda"), ({"device": "cpu"}, "cpu")):
        model = pyfunc.load_model(str(directory), model_config=model_config)
        assert next(model.unwrap_python_model().saved.model.parameters()).device.type == device
        predicted = model.predict(inputs.dev_frame, params={"batch_size": 5}).to_dict(orient="records")
        assert _decisions(predicted) == expected


def test_a_compiled_cuda_trial_trains_the_eager_losses_and_resumes(make_config, inputs_for):
    """train.compile with torch's default backend (Inductor: generated Triton kernels)."""
    torch._dynamo.reset()
    overrides = ("train.device=cuda", "train.precision=fp32", "train.tf32=false", "model.dropout=0.0")
    eager_config = _config(make_config, "pairs", "pair_classification", *overrides)
    compiled_config = _config(make_config, "pairs", "pair_classification", *overrides, "train.compile=true")
    inputs = inputs_for(eager_config)
    eager, eager_losses = _train(eager_config, inputs)
    compiled, compiled_losses = _train(compiled_config, inputs)
    assert compiled.outcome == State.COMPLETED.value and compiled.steps == eager.steps == 8
    # Inductor fuses and reorders reductions: equal to float32 rounding
    assert compiled_losses.losses == pytest.approx(eager_losses.losses, rel=FP32_TOLERANCE)

    resumed = Losses()
    state = _round_trip(compiled_losses.states[4])
    run_trial(compiled_config, resumed, inputs=inputs, resume_state=state)
    assert resumed.losses == pytest.approx(compiled_losses.losses[4:], rel=1e-5)
    for name, tensor in compiled_losses.states[8]["model"].items():
        torch.testing.assert_close(resumed.states[8]["model"][name], tensor, rtol=1e-4, atol=1e-6, msg=name)
    torch._dynamo.reset()


def test_tf32_is_on_during_a_trial_on_a_gpu_that_has_it_and_off_after(make_config, inputs_for):
    class Precision(Losses):
        def on_step(self, step: int, metrics: dict[str, float]) -> None:
            self.seen = torch.get_float32_matmul_precision()

    before = torch.get_float32_matmul_precision()
    for tf32 in ("true", "false"):
        config = make_config("pairs", "train.device=cuda", "train.max_steps=2", f"train.tf32={tf32}")
        recorder = Precision()
        run_trial(config, recorder, inputs=inputs_for(config))
        has_tf32 = torch.cuda.get_device_capability() >= (8, 0)
        assert recorder.seen == ("high" if tf32 == "true" and has_tf32 else before)
        assert torch.get_float32_matmul_precision() == before


def test_sdpa_attention_on_cuda_computes_what_eager_attention_does(make_config, inputs_for):
    from dicelab.tasks.backbones import build_encoder

    config = make_config("pairs")
    tokenizer = inputs_for(config).tokenizer
    ids = torch.randint(5, len(tokenizer), (4, 24), device="cuda")
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    hidden = {}
    for attention in ("sdpa", "eager"):
        torch.manual_seed(3)
        encoder = build_encoder(config.model, tokenizer, 64, attention=attention).cuda().eval()
        assert encoder.config._attn_implementation == attention
        with torch.no_grad():
            hidden[attention] = encoder(input_ids=ids, attention_mask=mask).last_hidden_state[mask.bool()]
    torch.testing.assert_close(hidden["sdpa"], hidden["eager"], rtol=1e-3, atol=1e-4)


def test_the_optimizer_on_cuda_is_fused_adamw(make_config, inputs_for):
    from dicelab.training.loop import Trial

    config = make_config("pairs", "train.device=cuda")
    trial = Trial(config, inputs_for(config), torch.device("cuda"), None)
    assert isinstance(trial.optimizer, torch.optim.AdamW) and trial.optimizer.defaults["fused"] is True


def _round_trip(state: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)
