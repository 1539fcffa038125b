"""Where and how a trial runs: device, precision, TF32 matmuls, threads, determinism, seeds, RNG snapshots."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.utils.deterministic

from dicelab.config import TrainConfig
from dicelab.errors import ConfigError

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
COMPILE_BACKEND = "inductor"  # torch.compile's default: generated Triton (GPU) or C++ (CPU) kernels


def select_device(train: TrainConfig, assigned_gpus: Sequence[str] = ()) -> torch.device:
    """The device to train on. `assigned_gpus`: the GPU ids a runner (Ray) gave the trial; when CUDA sees
    none of them the trial trains on CPU (see `device_fallback`) instead of failing."""
    if device_fallback(assigned_gpus) is not None:
        return torch.device("cpu")
    if train.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device: 'cuda' was asked for but CUDA is not available (use auto or cpu)")
    if train.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(train.device)


def device_fallback(assigned_gpus: Sequence[str] = ()) -> str | None:
    """One line when a GPU was assigned (by the runner, or through CUDA_VISIBLE_DEVICES) that CUDA cannot
    see, e.g. a Ray node that declares GPUs it does not have; None otherwise."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return fallback_reason(
        list(assigned_gpus),
        visible,
        torch.cuda.is_available(),
        torch.cuda.device_count() if torch.cuda.is_available() else 0,
    )


def fallback_reason(assigned: list[str], visible: str, cuda_available: bool, device_count: int) -> str | None:
    """The pure decision behind `device_fallback`: given GPUs, but CUDA unavailable or counting no device."""
    listed = [gpu.strip() for gpu in visible.split(",") if gpu.strip() not in ("", "-1")]
    given = [str(gpu) for gpu in assigned] or listed
    if not given or (cuda_available and device_count > 0):
        return None
    what = "CUDA is not available" if not cuda_available else "CUDA counts no device"
    return f"GPU {','.join(given)} was assigned but {what}: training on CPU in fp32"


def select_precision(train: TrainConfig, device: torch.device, fell_back: bool = False) -> str:
    """The precision to train in (see `resolve_precision`) on `device`. fell_back: the trial was given a GPU
    it cannot see and runs on CPU, where it trains in fp32 whatever train.precision asks."""
    native_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
    return resolve_precision(train.precision, device.type, native_bf16, fell_back)


def resolve_precision(asked: str, device_type: str, native_bf16: bool, fell_back: bool = False) -> str:
    """fp32, bf16 or fp16 for train.precision `asked`: auto is bf16 on a CUDA device with native bf16
    (Ampere and later), fp16 with a gradient scaler on older CUDA devices (T4, V100), fp32 on CPU, where
    autocast would be slower. An explicit bf16 / fp16 off CUDA, or bf16 on a GPU without it, is a config
    error.
    """
    if device_type != "cuda":
        if asked in ("bf16", "fp16") and not fell_back:
            raise ConfigError(
                f"train.precision: {asked} needs a CUDA device, and this trial runs on {device_type} "
                "(use auto: fp32 on CPU)"
            )
        return "fp32"
    if asked == "auto":
        return "bf16" if native_bf16 else "fp16"
    if asked == "bf16" and not native_bf16:
        raise ConfigError("train.precision: bf16 is not supported natively by this GPU (use fp16 or auto)")
    return asked


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision in AUTOCAST_DTYPES:
        return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])
    return contextlib.nullcontext()


def compile_model(model: torch.nn.Module) -> None:
    """train.compile: torch.compile the model's forward (encoder and head), for training and evaluation.
    In place, so the parameters, the optimizer's references and the state_dict keys stay those of the model.
    Length batching gives batches of many lengths: after the first length that differs, torch compiles one
    graph with a dynamic sequence length rather than one per length."""
    model.compile(backend=COMPILE_BACKEND)


def gradient_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler | None:
    """fp16 gradients underflow without loss scaling; bf16 has fp32's exponent range and needs none."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


def uses_tf32(train: TrainConfig, device: torch.device) -> bool:
    """TF32 matmuls: asked for (train.tf32) and on a CUDA GPU that has them (compute capability 8.0 and up:
    Ampere, Hopper, ...). fp32 inputs keep their range and lose mantissa bits inside the matmul only."""
    return train.tf32 and device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 0)


@contextlib.contextmanager
def torch_settings(train: TrainConfig, device: torch.device) -> Iterator[None]:
    """Thread count, TF32 matmuls (see `uses_tf32`) and (on CPU) deterministic algorithms for the trial, then
    the process's own settings."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    matmul_precision = torch.get_float32_matmul_precision()
    try:
        if train.num_threads is not None:
            torch.set_num_threads(train.num_threads)
        if uses_tf32(train, device):
            torch.set_float32_matmul_precision("high")  # TF32 where the GPU has it (cuBLAS matmuls)
        if device.type == "cpu":
            torch.use_deterministic_algorithms(True, warn_only=True)
            # Filling every new tensor only guards code that reads uninitialised memory; it costs bandwidth.
            torch.utils.deterministic.fill_uninitialized_memory = False
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill
        torch.set_float32_matmul_precision(matmul_precision)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def rng_state() -> dict[str, Any]:
    """Every global RNG the loop draws from (dropout), as plain values and tensors (weights_only-safe)."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.copy()), position, has_gauss, cached),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy(), position, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def cpu_copy(obj: Any) -> Any:
    """A snapshot of nested dicts/lists of tensors, on the CPU, that later training steps cannot change."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {key: cpu_copy(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(cpu_copy(value) for value in obj)
    return obj
