"""What every loss shares: checked, flattened inputs without ignored positions, per-class weights, and
a loss whose gradient is computed with its value. Helpers for log-space probability mass.

Shapes: logits (N,) or (N, 1) are binary (sigmoid) with targets (N,) in {0, 1}; (N, C) with C >= 2 is a
softmax with class-index targets (N,); any leading shape works the same way, e.g. (B, L, C) with (B, L).
Every loss computes in float32 (float64 stays float64, for gradcheck) with autocast switched off, and
works from logits in log space, so p = 1 or p = 0 in floating point never produces inf or NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from dicelab.losses import _checks


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


def compute_precision(logits: Tensor) -> AbstractContextManager:
    """Switch autocast off around a loss: it runs in the dtype `prepare` chose, never in bf16 / fp16."""
    device_type = logits.device.type if isinstance(logits, Tensor) else "cpu"  # `prepare` rejects the rest
    return torch.autocast(device_type=device_type, enabled=False)


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
        raise ValueError(
            f"target must hold class indices (an integer dtype) for {logits.shape[-1]}-class "
            f"logits, got {target.dtype}"
        )
    num_classes = 2 if binary else logits.shape[-1]
    flat_logits = logits.reshape(-1) if binary else logits.reshape(-1, num_classes)
    flat_target = target.reshape(-1)
    compute_dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    flat_logits = flat_logits.to(compute_dtype).contiguous()  # the kernels index flat views
    _checks.integer("ignore_index", ignore_index)

    if not _all_in_label_set(flat_target, num_classes, ignore_index):
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


def _all_in_label_set(target: Tensor, num_classes: int, ignore_index: int) -> bool:
    """The common case, checked with one reduction: no ignored position and every target a class index."""
    if target.numel() == 0 or 0 <= ignore_index < num_classes or target.is_floating_point():
        return False
    low, high = torch.aminmax(target)
    return int(low) >= 0 and int(high) < num_classes


def class_weights(name: str, weights: float | Sequence[float] | Tensor, inputs: LossInputs) -> Tensor:
    """Per-class weights as a (C,) tensor; a single number w means (1 - w, w) for a two-class problem."""
    if isinstance(weights, int | float):
        if inputs.num_classes != 2:
            raise ValueError(
                f"{name} as one number weights the positive class of a binary problem; give "
                f"{inputs.num_classes} per-class weights for {inputs.num_classes}-class logits"
            )
        weights = (1.0 - weights, weights)
    weights = torch.as_tensor(weights, dtype=inputs.logits.dtype, device=inputs.logits.device)
    if weights.shape != (inputs.num_classes,):
        raise ValueError(
            f"{name} has {weights.numel()} entries but the logits have {inputs.num_classes} classes"
        )
    return weights


ValueAndGradient = Callable[[Tensor, bool], tuple[Tensor, Tensor | None]]


def loss_with_gradient(logits: Tensor, value_and_gradient: ValueAndGradient) -> Tensor:
    """A scalar loss whose gradient with respect to `logits` is computed in the same pass as its value.

    `value_and_gradient(logits, need_gradient) -> (loss, dloss/dlogits or None)` works on plain tensors;
    the gradient formulas are written in logit space, where they stay finite even when p rounds to 1.
    One fused pass instead of autograd through ~30 elementwise steps is what makes the overlap and focal
    losses cost about as much as cross entropy (benchmarks/losses.py).
    """
    if not (logits.requires_grad and torch.is_grad_enabled()):  # evaluation: the value only
        return value_and_gradient(logits, False)[0]
    return _LossWithGradient.apply(logits, value_and_gradient)


class _LossWithGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, value_and_gradient: ValueAndGradient) -> Tensor:
        loss, gradient = value_and_gradient(logits.detach(), ctx.needs_input_grad[0])
        ctx.save_for_backward(gradient)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, None]:
        (gradient,) = ctx.saved_tensors
        return (None if gradient is None else gradient * grad_output), None


def precision_floor(dtype: torch.dtype) -> float:
    """The smallest probability mass still held with full relative precision (about 1e-31 in float32)."""
    return torch.finfo(dtype).tiny / torch.finfo(dtype).eps


def underflowed_rows(mass: Tensor) -> Tensor:
    """Indices of the rows whose probability mass is below `precision_floor`: these redo it in log space."""
    return (mass < precision_floor(mass.dtype)).nonzero().squeeze(-1)


def log_mass(logits: Tensor, included: Tensor) -> Tensor:
    """log of the softmax probability mass of the `included` classes (bool or 0/1), per row, in log space:
    exact even where that mass underflows in linear space (a margin of more than ~87 in float32)."""
    log_p = torch.log_softmax(logits, dim=-1)
    return torch.logsumexp(log_p.masked_fill(included == 0, -math.inf), dim=-1)


def _describe(value: object) -> str:
    return f"a tensor of dtype {value.dtype}" if isinstance(value, Tensor) else type(value).__name__
