"""Shared fixtures of the loss tests: the test oracle, a plain autograd transcription of DESIGN.md's formulas.

The oracle forms p and 1 - p directly and lets autograd differentiate: fine in float64 for moderate logits,
which is where it is used. It shares no code with `dicelab.losses`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor


def _columns(logits: Tensor, target: Tensor, ignore_index: int) -> tuple[Tensor, Tensor, Tensor]:
    """Kept positions as one-vs-rest columns: p (M, K), y (M, K), and the targets (M,)."""
    binary = logits.dim() == 1 or logits.shape[-1] == 1
    classes = 2 if binary else logits.shape[-1]
    flat_logits = logits.reshape(-1) if binary else logits.reshape(-1, classes)
    flat_target = target.reshape(-1)
    keep = flat_target != ignore_index
    flat_logits, flat_target = flat_logits[keep], flat_target[keep].long()
    if binary:
        p = torch.sigmoid(flat_logits).unsqueeze(-1)
        y = flat_target.to(p.dtype).unsqueeze(-1)
    else:
        p = torch.softmax(flat_logits, dim=-1)
        y = F.one_hot(flat_target, classes).to(p.dtype)
    return p, y, flat_target


def _target_probability(p: Tensor, y: Tensor, target: Tensor) -> Tensor:
    if p.shape[-1] == 1:  # binary: p_t is p for y = 1 and 1 - p for y = 0
        return torch.where(target == 1, p[:, 0], 1 - p[:, 0])
    return p.gather(-1, target.unsqueeze(-1)).squeeze(-1)


def _overlap(
    numerator: Tensor, denominator: Tensor, smooth: float, level: str, class_reduction: str
) -> Tensor:
    if level == "batch":
        per_class = 1 - (numerator.sum(0) + smooth) / (denominator.sum(0) + smooth)
    else:
        per_class = (1 - (numerator + smooth) / (denominator + smooth)).mean(0)
    return per_class.mean() if class_reduction == "mean" else per_class.sum()


def reference_loss(name: str, logits: Tensor, target: Tensor, ignore_index: int = -100, **params) -> Tensor:
    p, y, flat_target = _columns(logits, target, ignore_index)
    pt = _target_probability(p, y, flat_target)
    if name == "ce":
        return -torch.log(pt).mean()
    if name == "wce":
        counts = [float(c) for c in params["class_counts"]]
        n, K = sum(counts), params.get("K", 1.0)
        weights = torch.tensor([math.log10((n - c) / c + K) for c in counts], dtype=pt.dtype)
        return -(weights[flat_target] * torch.log(pt)).sum() / pt.numel()
    if name == "focal":
        gamma, alpha = params.get("gamma", 2.0), params.get("alpha")
        losses = -((1 - pt) ** gamma) * torch.log(pt)
        if alpha is not None:
            weights = [1 - alpha, alpha] if isinstance(alpha, float) else alpha
            losses = losses * torch.tensor(weights, dtype=pt.dtype)[flat_target]
        return losses.mean()
    smooth = params.get("smooth", 1.0)
    level, class_reduction = params.get("level", "example"), params.get("class_reduction", "mean")
    if name == "tversky":
        alpha, beta = params.get("alpha", 0.5), params.get("beta", 0.5)
        tp, fp, fn = p * y, p * (1 - y), (1 - p) * y
        return _overlap(tp, tp + alpha * fp + beta * fn, smooth, level, class_reduction)
    if name == "dice":
        q, square = p, params.get("square_denominator", True)
    elif name == "dsc":
        q, square = (1 - p) ** params.get("alpha", 1.0) * p, params.get("square_denominator", False)
    else:
        raise KeyError(name)
    return _overlap(2 * q * y, (q * q if square else q) + y, smooth, level, class_reduction)


@pytest.fixture
def reference() -> Callable[..., Tensor]:
    """`reference(name, logits, target, **params)`: the oracle for `build_loss(name, **params)`."""
    return reference_loss
