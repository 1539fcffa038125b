"""Focal loss (Lin et al. 2017): -alpha_t (1 - p_t)^gamma log p_t, averaged over kept positions."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from dicelab.losses import _checks
from dicelab.losses._inputs import (
    class_weights,
    compute_precision,
    log_mass,
    loss_with_gradient,
    prepare,
    underflowed_rows,
)
from dicelab.losses.base import Loss
from dicelab.losses.registry import LOSSES

FocalAlpha = float | Sequence[float] | Tensor | None


def focal_options(*, gamma: float, alpha: FocalAlpha) -> dict[str, Any]:
    """gamma >= 0; alpha None, one number in [0, 1] (binary: alpha for y = 1, 1 - alpha for y = 0) or
    per-class weights >= 0. A tensor alpha is taken as it is: reading its values on every call would
    synchronise a GPU."""
    if isinstance(alpha, int | float):
        alpha = _checks.number("alpha", alpha, minimum=0.0, maximum=1.0)
    elif alpha is not None and not isinstance(alpha, Tensor):
        alpha = _checks.numbers("alpha", alpha, minimum=0.0, min_length=2)
    return {"gamma": _checks.number("gamma", gamma, minimum=0.0), "alpha": alpha}


def focal_loss(
    logits: Tensor, target: Tensor, *, gamma: float = 2.0, alpha: FocalAlpha = None, ignore_index: int = -100
) -> Tensor:
    """Mean over kept positions of -alpha_t (1 - p_t)^gamma log p_t; gamma = 0 without alpha is `ce`.

    (1 - p_t)^gamma is exp(gamma log(1 - p_t)) with log(1 - p_t) from logits, and the gradient is taken in
    logit space, where it is bounded: finite also for 0 < gamma < 1 at p_t = 1, where (1 - p)^gamma has an
    infinite derivative with respect to p.
    """
    options = focal_options(gamma=gamma, alpha=alpha)
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        weights = None if options["alpha"] is None else class_weights("alpha", options["alpha"], inputs)
        position_weights = None if weights is None else weights[inputs.target]
        kernel = _binary_focal if inputs.binary else _softmax_focal
        return loss_with_gradient(
            inputs.logits,
            partial(kernel, target=inputs.target, gamma=options["gamma"], weights=position_weights),
        )


def _modulation(log_1mpt: Tensor, gamma: float) -> Tensor:
    """(1 - p_t)^gamma as exp(gamma log(1 - p_t)); exactly 1 for gamma = 0, also where 1 - p_t = 0."""
    return torch.exp(gamma * log_1mpt) if gamma else torch.ones_like(log_1mpt)


def _binary_focal(
    x: Tensor, need_gradient: bool, *, target: Tensor, gamma: float, weights: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    sign = 2.0 * target.to(x.dtype) - 1.0
    z = sign * x  # the logit of the target class: p_t = sigmoid(z)
    log_1mpt = F.logsigmoid(-z)
    log_pt = z + log_1mpt  # logsigmoid(z) = z + logsigmoid(-z)
    scale = _modulation(log_1mpt, gamma).mul_(-1.0 / x.shape[0])  # -(1 - p_t)^gamma / N
    if weights is not None:
        scale.mul_(weights)
    loss = torch.dot(scale, log_pt)
    if not need_gradient:
        return loss, None
    # d/dz of (1 - p_t)^gamma log p_t is (1 - p_t)^gamma (1 - p_t - gamma p_t log p_t)
    slope = log_1mpt.exp_().sub_(log_pt.mul_(torch.sigmoid(z)), alpha=gamma)
    return loss, slope.mul_(scale).mul_(sign)


def _softmax_focal(
    x: Tensor, need_gradient: bool, *, target: Tensor, gamma: float, weights: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    index = target.unsqueeze(-1)
    log_p = torch.log_softmax(x, dim=-1)
    log_pt = log_p.gather(-1, index).squeeze(-1)
    others = log_p.exp_().scatter_(-1, index, 0.0)  # p of every class but the target (one buffer)
    rest = others.sum(-1)  # 1 - p_t as the other classes' mass: no cancellation
    log_1mpt = rest.log()
    exact_rows = underflowed_rows(rest)  # 1 - p_t below float precision: redo in log space
    if exact_rows.numel():
        not_target = torch.ones_like(others[exact_rows]).scatter_(-1, index[exact_rows], 0.0)
        log_1mpt[exact_rows] = log_mass(x[exact_rows], not_target)
    scale = _modulation(log_1mpt, gamma).mul_(-1.0 / x.shape[0])  # -(1 - p_t)^gamma / N
    if weights is not None:
        scale.mul_(weights)
    loss = torch.dot(scale, log_pt)
    if not need_gradient:
        return loss, None
    # d/dx_j of (1 - p_t)^gamma log p_t = (1 - p_t)^gamma (1 - gamma p_t log(p_t) / (1 - p_t)) (y_j - p_j);
    # log(p_t) / (1 - p_t) tends to -1 as p_t -> 1: there it is log1p(-w) / w with w = 1 - p_t.
    near_one = torch.log1p(-rest).div_(rest)
    log_ratio = torch.where(rest >= 0.5, log_pt / rest, torch.where(rest > 0, near_one, -1.0))
    # p_t log(p_t) / (1 - p_t) -> 0 as p_t -> 0 (a target masked with a -inf logit)
    pt_log_ratio = log_ratio.mul_(torch.exp(log_pt)).nan_to_num_(nan=0.0)
    row_scale = scale.mul_(pt_log_ratio.mul_(-gamma).add_(1.0)).unsqueeze(-1)
    # (y - p) row_scale, with y_t - p_t = 1 - p_t = rest
    return loss, others.mul_(-row_scale).scatter_add_(-1, index, row_scale * rest.unsqueeze(-1))


@LOSSES.register("focal")
class FocalLoss(Loss):
    """Focal loss. `alpha`: one number in [0, 1] for binary logits (weight alpha for y = 1 and 1 - alpha
    for y = 0) or a list of C per-class weights >= 0; None: no class weights."""

    def __init__(self, *, gamma: float = 2.0, alpha: FocalAlpha = None, ignore_index: int = -100):
        super().__init__(ignore_index=ignore_index)
        options = focal_options(gamma=gamma, alpha=alpha)
        self.options["gamma"] = options["gamma"]
        if isinstance(options["alpha"], tuple | Tensor):  # a buffer follows the module to its device
            weights = torch.as_tensor(options["alpha"], dtype=torch.float64)
            self.register_buffer("alpha", weights, persistent=False)
        else:
            self.alpha = options["alpha"]

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return focal_loss(logits, target, alpha=self.alpha, **self.options)

    def extra_repr(self) -> str:
        alpha = self.alpha.tolist() if isinstance(self.alpha, Tensor) else self.alpha
        return f"alpha={alpha!r}, {super().extra_repr()}"
