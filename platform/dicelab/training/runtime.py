"""Where and how a trial runs: device, precision, threads, determinism, seeds and RNG snapshots."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
import torch.utils.deterministic

from dicelab.config import TrainConfig
from dicelab.errors import ConfigError


def select_device(train: TrainConfig) -> torch.device:
    if train.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device: 'cuda' was asked for but CUDA is not available (use auto or cpu)")
    if train.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(train.device)


def select_precision(train: TrainConfig, device: torch.device) -> str:
    """The precision to train in: bf16 (autocast, CUDA only: on CPU it would be slower) or fp32."""
    if train.precision == "bf16" and device.type != "cuda":
        raise ConfigError("train.precision: bf16 needs a CUDA device (use auto: bf16 on CUDA, fp32 on CPU)")
    if train.precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return train.precision


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def torch_settings(train: TrainConfig, device: torch.device) -> Iterator[None]:
    """Thread count and (on CPU) deterministic algorithms for the trial, then the process's own settings."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    try:
        if train.num_threads is not None:
            torch.set_num_threads(train.num_threads)
        if device.type == "cpu":
            torch.use_deterministic_algorithms(True, warn_only=True)
            # Filling every new tensor only guards code that reads uninitialised memory; it costs bandwidth.
            torch.utils.deterministic.fill_uninitialized_memory = False
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


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
