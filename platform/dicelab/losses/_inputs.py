"""From `(logits, target)` to flat tensors without ignored positions, and log-space probabilities.

Shapes: logits (N,) or (N, 1) are binary (sigmoid) with targets (N,) in {0, 1}; (N, C) with C >= 2 is a
softmax with class-index targets (N,); any leading shape works the same way, e.g. (B, L, C) with (B, L).
Every loss computes in float32 (float64 stays float64, for gradcheck) with autocast switched off, and
works from logits in log space, so p = 1 or p = 0 in floating point never produces inf or NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass(frozen=True)
class LossInputs:
    """Kept positions only: `logits` (M,) for binary or (M, C) for softmax, `target` (M,) int64."""

    logits: Tensor
    target: Tensor
    num_classes: int  # 2 for binary logits

    @property
    def binary(self) -> bool:
        return self.logits.dim() == 1

    @property
    def size(self) -> int:
        return self.target.numel()

    def zero(self) -> Tensor:
        """The loss of a batch without kept positions: 0, still attached to the graph."""
        return self.logits.sum() * 0.0

    def one_vs_rest_target(self) -> Tensor:
        """y as (M, K) floats: K = 1 column (the positive class) for binary, K = C one-hot columns otherwise."""
        if self.binary:
            return self.target.to(self.logits.dtype).unsqueeze(-1)
        return F.one_hot(self.target, self.num_classes).to(self.logits.dtype)


def compute_precision(logits: Tensor) -> AbstractContextManager:
    """Switch autocast off around a loss: it runs in the dtype `prepare` chose, never in bf16 / fp16."""
    return torch.autocast(device_type=logits.device.type, enabled=False)


def prepare(logits: Tensor, target: Tensor, ignore_index: int) -> LossInputs:
    """Check shapes and targets, flatten, upcast and drop the positions whose target is `ignore_index`."""
    if not isinstance(logits, Tensor) or not logits.is_floating_point():
        raise ValueError(f"logits must be a floating-point tensor, got {_describe(logits)}")
    if not isinstance(target, Tensor):
        raise ValueError(f"target must be a tensor, got {_describe(target)}")
    if logits.dim() == 0:
        raise ValueError("logits must have at least one dimension, got a scalar")
    binary = logits.dim() == 1 or logits.shape[-1] == 1
    expected = [logits.shape[:-1]] if logits.dim() > 1 else []
    if binary:
        expected.append(logits.shape)
    if target.shape not in expected:
        allowed = " or ".join(str(tuple(shape)) for shape in expected)
        raise ValueError(
            f"target shape {tuple(target.shape)} does not match logits shape {tuple(logits.shape)} "
            f"(expected {allowed})"
        )
    if target.dtype == torch.bool:
        target = target.long()
    if not binary and target.is_floating_point():
        raise ValueError(f"target must hold class indices (an integer dtype) for {logits.shape[-1]}-class "
                         f"logits, got {target.dtype}")
    num_classes = 2 if binary else logits.shape[-1]
    flat_logits = logits.reshape(-1) if binary else logits.reshape(-1, num_classes)
    flat_target = target.reshape(-1)
    compute_dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    flat_logits = flat_logits.to(compute_dtype)

    keep = flat_target != ignore_index
    invalid = keep & ((flat_target < 0) | (flat_target >= num_classes))
    if flat_target.is_floating_point():
        invalid |= keep & (flat_target != flat_target.floor())
    if invalid.any():
        bad = flat_target[invalid][0].item()
        label_set = "{0, 1}" if binary else f"[0, {num_classes - 1}]"
        raise ValueError(f"target must be in {label_set} or ignore_index={ignore_index}, got {bad:g}")
    if not keep.all():
        flat_logits, flat_target = flat_logits[keep], flat_target[keep]
    return LossInputs(flat_logits, flat_target.long(), num_classes)


def class_weights(name: str, weights: float | Sequence[float] | Tensor, inputs: LossInputs) -> Tensor:
    """Per-class weights as a (C,) tensor; a single number w means (1 - w, w) for a two-class problem."""
    if isinstance(weights, int | float):
        if inputs.num_classes != 2:
            raise ValueError(f"{name} as one number weights the positive class of a binary problem; give "
                             f"{inputs.num_classes} per-class weights for {inputs.num_classes}-class logits")
        weights = (1.0 - weights, weights)
    weights = torch.as_tensor(weights, dtype=inputs.logits.dtype, device=inputs.logits.device)
    if weights.shape != (inputs.num_classes,):
        raise ValueError(f"{name} has {weights.numel()} entries but the logits have {inputs.num_classes} classes")
    return weights


def probabilities(inputs: LossInputs) -> Tensor:
    """p per one-vs-rest column, (M, K) like `one_vs_rest_target`."""
    if inputs.binary:
        return torch.sigmoid(inputs.logits).unsqueeze(-1)
    return torch.softmax(inputs.logits, dim=-1)


def log_probabilities(inputs: LossInputs) -> tuple[Tensor, Tensor]:
    """log p and log(1 - p) per one-vs-rest column, (M, K) each, without ever forming 1 - p."""
    if inputs.binary:
        x = inputs.logits.unsqueeze(-1)
        return F.logsigmoid(x), F.logsigmoid(-x)
    log_p = torch.log_softmax(inputs.logits, dim=-1)
    top = log_p.argmax(dim=-1, keepdim=True)
    others = log_p.scatter(-1, top, -math.inf)
    # Every class but the most likely one has p <= 1/2, where log1p(-p) is accurate.
    log_1mp = torch.log1p(-others.exp())
    # For the most likely class 1 - p is the other classes' mass: exact in log space even when p rounds to 1.
    return log_p, log_1mp.scatter(-1, top, torch.logsumexp(others, dim=-1, keepdim=True))


def target_log_probabilities(inputs: LossInputs) -> tuple[Tensor, Tensor]:
    """log p_t and log(1 - p_t) of each position's target class, (M,) each."""
    if inputs.binary:
        signed = torch.where(inputs.target == 1, inputs.logits, -inputs.logits)
        return F.logsigmoid(signed), F.logsigmoid(-signed)
    log_p = torch.log_softmax(inputs.logits, dim=-1)
    index = inputs.target.unsqueeze(-1)
    log_1mpt = torch.logsumexp(log_p.scatter(-1, index, -math.inf), dim=-1)
    return log_p.gather(-1, index).squeeze(-1), log_1mpt


def _describe(value: object) -> str:
    return f"a tensor of dtype {value.dtype}" if isinstance(value, Tensor) else type(value).__name__
