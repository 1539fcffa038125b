"""Focal loss (Lin et al. 2017): -alpha_t (1 - p_t)^gamma log p_t, averaged over kept positions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from dicelab.losses import _checks
from dicelab.losses._base import LOSSES, Loss
from dicelab.losses._inputs import class_weights, compute_precision, prepare, target_log_probabilities

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


def focal_loss(logits: Tensor, target: Tensor, *, gamma: float = 2.0, alpha: FocalAlpha = None,
               ignore_index: int = -100) -> Tensor:
    """Mean over kept positions of -alpha_t (1 - p_t)^gamma log p_t; gamma = 0 without alpha is `ce`.

    (1 - p_t)^gamma is computed as exp(gamma log(1 - p_t)) from logits, so its gradient stays finite for
    0 < gamma < 1 at p_t = 1, where the derivative of (1 - p)^gamma with respect to p is infinite.
    """
    options = focal_options(gamma=gamma, alpha=alpha)
    gamma, alpha = options["gamma"], options["alpha"]
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        log_pt, log_1mpt = target_log_probabilities(inputs)
        losses = -torch.exp(gamma * log_1mpt) * log_pt
        if alpha is not None:
            losses = losses * class_weights("alpha", alpha, inputs)[inputs.target]
        return losses.mean()


@LOSSES.register("focal")
class FocalLoss(Loss):
    """Focal loss. `alpha`: one number in [0, 1] for binary logits (weight alpha for y = 1 and 1 - alpha
    for y = 0) or a list of C per-class weights >= 0; None: no class weights."""

    def __init__(self, *, gamma: float = 2.0, alpha: FocalAlpha = None, ignore_index: int = -100):
        super().__init__(ignore_index=ignore_index)
        options = focal_options(gamma=gamma, alpha=alpha)
        self.options["gamma"] = options["gamma"]
        if isinstance(options["alpha"], tuple | Tensor):  # a buffer follows the module to its device
            self.register_buffer("alpha", torch.as_tensor(options["alpha"], dtype=torch.float32))
        else:
            self.alpha = options["alpha"]

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return focal_loss(logits, target, alpha=self.alpha, **self.options)

    def extra_repr(self) -> str:
        alpha = self.alpha.tolist() if isinstance(self.alpha, Tensor) else self.alpha
        return f"alpha={alpha!r}, {super().extra_repr()}"
