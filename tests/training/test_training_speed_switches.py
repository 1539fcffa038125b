"""The loop's speed switches on CPU: `train.compile` (torch.compile of encoder and head), the SDPA attention
implementation, TF32 matmuls (a CUDA-only decision, checked here as a decision) and the step loop's
batched host sync. Each switch trains the same losses as without it, within tolerance, and a trial with it
resumes exactly where it stopped. tests/training/test_training_cuda.py has the same rows on a GPU.

torch.compile runs with its `aot_eager` backend here: Dynamo's graph capture and AOTAutograd's joint
forward/backward graph, which is what turns the model into compiled graphs, without Inductor's C++ code
generation (minutes of a loaded 2-core machine for this tiny model); the CUDA file runs Inductor.
"""

from __future__ import annotations

import io

import pytest
import torch
import torch._dynamo
from transformers import XLNetConfig, XLNetModel

from dicelab.config import ModelConfig, TrainConfig
from dicelab.errors import TrialFailed
from dicelab.losses import build_loss
from dicelab.tasks.backbones import build_encoder
from dicelab.tracking import conventions as names
from dicelab.training import Evaluation, Reporter, TrialResult, run_trial, runtime
from dicelab.training import loop as loop_module
from dicelab.training.runtime import torch_settings, uses_tf32

# aot_eager runs the eager kernels in a traced graph: the same arithmetic, in an order that may differ
COMPILED_TOLERANCE = 1e-5


class Steps(Reporter):
    """The training loss of every step and the resumable state at every evaluation."""

    def __init__(self) -> None:
        self.losses: dict[int, float] = {}
        self.states: dict[int, dict] = {}

    def on_step(self, step: int, metrics: dict[str, float]) -> None:
        self.losses[step] = metrics[names.TRAIN_LOSS]

    def on_evaluation(self, evaluation: Evaluation) -> None:
        self.states[evaluation.step] = evaluation.state()

    def on_end(self, result: TrialResult) -> None:
        self.result = result


def _train(config, inputs, resume_state=None) -> Steps:
    steps = Steps()
    run_trial(config, steps, inputs=inputs, resume_state=resume_state)
    return steps


def _round_trip(state: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.fixture
def cheap_compile(monkeypatch):
    monkeypatch.setattr(runtime, "COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()  # no compiled code of these models is kept for later tests


def test_a_compiled_trial_trains_the_eager_losses_and_resumes_exactly(cheap_compile, make_config, inputs_for):
    overrides = ("train.max_steps=4", "train.eval_every_steps=2", "train.log_every_steps=1")
    eager_config = make_config("pairs", *overrides)
    compiled_config = make_config("pairs", *overrides, "train.compile=true")
    inputs = inputs_for(eager_config)
    eager = _train(eager_config, inputs)
    compiled = _train(compiled_config, inputs)

    assert compiled.result.steps == eager.result.steps == 4
    assert compiled.losses == pytest.approx(eager.losses, rel=COMPILED_TOLERANCE)
    final_eager, final_compiled = eager.states[4]["model"], compiled.states[4]["model"]
    assert final_compiled.keys() == final_eager.keys()  # compiled in place: a checkpoint loads either way
    for name, tensor in final_eager.items():
        torch.testing.assert_close(final_compiled[name], tensor, rtol=1e-4, atol=1e-6, msg=name)

    resumed = _train(compiled_config, inputs, resume_state=_round_trip(compiled.states[2]))
    assert resumed.losses == {step: compiled.losses[step] for step in (3, 4)}
    for name, tensor in compiled.states[4]["model"].items():
        assert torch.equal(resumed.states[4]["model"][name], tensor), name


def test_sdpa_attention_computes_what_eager_attention_does(make_config, inputs_for):
    config = make_config("pairs")
    tokenizer = inputs_for(config).tokenizer
    encoders = {}
    for attention in ("sdpa", "eager"):
        torch.manual_seed(3)
        encoders[attention] = build_encoder(config.model, tokenizer, 64, attention=attention)
        assert encoders[attention].config._attn_implementation == attention
    ids = torch.randint(5, len(tokenizer), (4, 12))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding: the mask reaches SDPA as an additive bias
    outputs = {}
    for attention, encoder in encoders.items():
        encoder.train(False)
        hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        hidden[mask.bool()].square().sum().backward()
        outputs[attention] = (hidden[mask.bool()].detach(), encoder.embeddings.word_embeddings.weight.grad)
    torch.testing.assert_close(outputs["sdpa"][0], outputs["eager"][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outputs["sdpa"][1], outputs["eager"][1], rtol=1e-4, atol=1e-4)


def test_a_family_without_sdpa_loads_with_its_own_attention(tmp_path):
    directory = tmp_path / "tiny-xlnet"
    XLNetModel(XLNetConfig(vocab_size=50, d_model=16, n_layer=1, n_head=2, d_inner=32)).save_pretrained(
        directory
    )
    encoder = build_encoder(ModelConfig(backbone=str(directory)), tokenizer=None)
    assert isinstance(encoder, XLNetModel) and encoder.config._attn_implementation == "eager"


@pytest.mark.parametrize(
    ("asked", "device", "capability", "expected"),
    [
        (True, "cpu", None, False),  # TF32 is a CUDA matmul mode
        (True, "cuda", (8, 0), True),  # A100
        (True, "cuda", (9, 0), True),  # H100 / H200
        (True, "cuda", (7, 5), False),  # T4: no TF32 units
        (False, "cuda", (9, 0), False),
    ],
)
def test_tf32_is_used_where_asked_for_and_the_gpu_has_it(monkeypatch, asked, device, capability, expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert uses_tf32(TrainConfig(tf32=asked), torch.device(device)) is expected


def test_the_trial_leaves_the_process_matmul_precision_as_it_found_it():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        with torch_settings(TrainConfig(tf32=True), torch.device("cpu")):
            assert torch.get_float32_matmul_precision() == "medium"  # untouched on CPU
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(before)


class InfGradientAt(torch.nn.Module):
    """The loss, with inf gradients from training step `step` on (counted in forward calls)."""

    def __init__(self, loss: torch.nn.Module, step: int) -> None:
        super().__init__()
        self.loss, self.step, self.calls = loss, step, 0

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        value = self.loss(logits, target)
        if logits.requires_grad:
            self.calls += 1
            if self.calls >= self.step:
                value.register_hook(lambda grad: grad * float("inf"))
        return value


def test_the_steps_between_checks_run_without_a_sync_and_a_nan_is_named_at_its_step(
    monkeypatch, make_config, inputs_for
):
    """The loop reads losses and norms at logging steps only: an inf gradient at step 3 is found at the
    check of step 4 and named at step 3; the steps before it were checked and reported."""
    monkeypatch.setattr(
        loop_module, "build_loss", lambda *args, **kwargs: InfGradientAt(build_loss(*args, **kwargs), 3)
    )
    synced: list[int] = []
    check_steps = loop_module.Trial._check_steps

    def counted(trial):
        synced.append(trial.progress.step)
        return check_steps(trial)

    monkeypatch.setattr(loop_module.Trial, "_check_steps", counted)
    config = make_config("pairs", "train.max_steps=8", "train.log_every_steps=4")
    steps = Steps()
    with pytest.raises(TrialFailed, match=r"^non-finite gradient norm \((inf|nan)\) at step 3 "):
        run_trial(config, steps, inputs=inputs_for(config))
    assert synced == [4]  # one read for steps 1-4
    assert steps.result.outcome == names.NON_FINITE and steps.result.steps == 4


def test_the_optimizer_is_adamws_fused_kernel(make_config, inputs_for):
    config = make_config("pairs")
    trial = loop_module.Trial(config, inputs_for(config), torch.device("cpu"), None)
    assert isinstance(trial.optimizer, torch.optim.AdamW) and trial.optimizer.defaults["fused"] is True
