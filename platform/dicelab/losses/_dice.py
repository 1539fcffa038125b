"""The set-overlap family: dice (eqs. 6-8), Tversky (eq. 10) and self-adjusting dice `dsc` (eq. 12).

Each is 1 - (numerator + smooth) / (denominator + smooth), computed one-vs-rest for every class column
(binary logits: one column, the positive class) and then
- level="example": per position, averaged over kept positions (the per-example forms of the paper);
- level="batch": numerator and denominator summed over all kept positions first (the set-level form, eq. 8);
and finally reduced over classes with class_reduction "mean" or "sum" (the official code sums).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from dicelab.errors import ConfigError
from dicelab.losses import _checks
from dicelab.losses._base import LOSSES, Loss
from dicelab.losses._inputs import (
    LossInputs,
    compute_precision,
    log_probabilities,
    prepare,
    probabilities,
)


def dice_loss(logits: Tensor, target: Tensor, *, smooth: float = 1.0, square_denominator: bool = True,
              level: str = "example", class_reduction: str = "mean", ignore_index: int = -100) -> Tensor:
    """1 - (2 p y + smooth) / (p^k + y^k + smooth), k = 2 with `square_denominator` (Milletari) else 1."""
    options = dice_options(smooth=smooth, square_denominator=square_denominator, level=level,
                           class_reduction=class_reduction)
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        return _dice(probabilities(inputs), inputs, **options)


def dsc_loss(logits: Tensor, target: Tensor, *, alpha: float = 1.0, smooth: float = 1.0,
             square_denominator: bool = False, level: str = "example", class_reduction: str = "mean",
             ignore_index: int = -100) -> Tensor:
    """Self-adjusting dice: dice with p replaced by q = (1 - p)^alpha p; alpha = 0 is `dice_loss`.

    q is exp(alpha log(1 - p) + log p) from logits: finite values and gradients for every alpha >= 0,
    also at p = 1 with 0 < alpha < 1, where (1 - p)^alpha has an infinite derivative.
    """
    options = dsc_options(alpha=alpha, smooth=smooth, square_denominator=square_denominator, level=level,
                          class_reduction=class_reduction)
    alpha = options.pop("alpha")
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        log_p, log_1mp = log_probabilities(inputs)
        return _dice(torch.exp(alpha * log_1mp + log_p), inputs, **options)


def tversky_loss(logits: Tensor, target: Tensor, *, alpha: float = 0.5, beta: float = 0.5, smooth: float = 1.0,
                 level: str = "example", class_reduction: str = "mean", ignore_index: int = -100) -> Tensor:
    """1 - (TP + smooth) / (TP + alpha FP + beta FN + smooth), TP = p y, FP = p (1 - y), FN = (1 - p) y.

    alpha, beta >= 0 with alpha + beta > 0; alpha = beta = 1/2 with smooth s/2 is dice (k = 1) with s.
    """
    options = tversky_options(alpha=alpha, beta=beta, smooth=smooth, level=level,
                              class_reduction=class_reduction)
    alpha, beta = options.pop("alpha"), options.pop("beta")
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        log_p, log_1mp = log_probabilities(inputs)
        p, y = torch.exp(log_p), inputs.one_vs_rest_target()
        true_positive = p * y
        # TP + alpha FP = p (y + alpha (1 - y)); FN uses exp(log(1 - p)), exact where p rounds to 1.
        denominator = p * (alpha + (1.0 - alpha) * y) + beta * torch.exp(log_1mp) * y
        return _overlap(true_positive, denominator, **options)


def dice_options(*, smooth: float, square_denominator: bool, level: str, class_reduction: str) -> dict[str, Any]:
    return {
        **_overlap_options(smooth, level, class_reduction),
        "square_denominator": _checks.flag("square_denominator", square_denominator),
    }


def dsc_options(*, alpha: float, **dice: Any) -> dict[str, Any]:
    return {"alpha": _checks.number("alpha", alpha, minimum=0.0), **dice_options(**dice)}


def tversky_options(*, alpha: float, beta: float, smooth: float, level: str,
                    class_reduction: str) -> dict[str, Any]:
    alpha = _checks.number("alpha", alpha, minimum=0.0)
    beta = _checks.number("beta", beta, minimum=0.0)
    if alpha + beta <= 0:
        raise ConfigError("alpha + beta must be > 0 (with alpha = beta = 0 every prediction scores 1)")
    return {"alpha": alpha, "beta": beta, **_overlap_options(smooth, level, class_reduction)}


def _overlap_options(smooth: float, level: str, class_reduction: str) -> dict[str, Any]:
    return {
        "smooth": _checks.number("smooth", smooth, minimum=0.0),
        "level": _checks.choice("level", level, _checks.LEVELS),
        "class_reduction": _checks.choice("class_reduction", class_reduction, _checks.CLASS_REDUCTIONS),
    }


def _dice(q: Tensor, inputs: LossInputs, *, square_denominator: bool, smooth: float, level: str,
          class_reduction: str) -> Tensor:
    y = inputs.one_vs_rest_target()
    # y is 0 or 1, so y^k = y.
    denominator = (q * q if square_denominator else q) + y
    return _overlap(2.0 * q * y, denominator, smooth=smooth, level=level, class_reduction=class_reduction)


def _overlap(numerator: Tensor, denominator: Tensor, *, smooth: float, level: str, class_reduction: str) -> Tensor:
    """1 - (numerator + smooth) / (denominator + smooth) from (M, K) terms, reduced to a scalar."""
    if level == "batch":
        numerator, denominator = numerator.sum(0), denominator.sum(0)
    # The floor only matters with smooth = 0 and an all-zero denominator, where the numerator is 0 too.
    ratio = (numerator + smooth) / (denominator + smooth).clamp_min(torch.finfo(denominator.dtype).tiny)
    per_class = 1.0 - (ratio.mean(0) if level == "example" else ratio)
    return per_class.mean() if class_reduction == "mean" else per_class.sum()


@LOSSES.register("dice")
class DiceLoss(Loss):
    """Dice loss; `square_denominator` (default True) squares p in the denominator (Milletari et al.)."""

    def __init__(self, *, smooth: float = 1.0, square_denominator: bool = True, level: str = "example",
                 class_reduction: str = "mean", ignore_index: int = -100):
        super().__init__(ignore_index=ignore_index)
        self.options.update(dice_options(smooth=smooth, square_denominator=square_denominator, level=level,
                                         class_reduction=class_reduction))

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return dice_loss(logits, target, **self.options)


@LOSSES.register("dsc")
class SelfAdjustingDiceLoss(Loss):
    """Self-adjusting dice loss (the paper's DSC); `alpha` >= 0 is the exponent of (1 - p)."""

    def __init__(self, *, alpha: float = 1.0, smooth: float = 1.0, square_denominator: bool = False,
                 level: str = "example", class_reduction: str = "mean", ignore_index: int = -100):
        super().__init__(ignore_index=ignore_index)
        self.options.update(dsc_options(alpha=alpha, smooth=smooth, square_denominator=square_denominator,
                                        level=level, class_reduction=class_reduction))

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return dsc_loss(logits, target, **self.options)


@LOSSES.register("tversky")
class TverskyLoss(Loss):
    """Tversky loss; `alpha` weighs false positives and `beta` false negatives (both >= 0, sum > 0)."""

    def __init__(self, *, alpha: float = 0.5, beta: float = 0.5, smooth: float = 1.0, level: str = "example",
                 class_reduction: str = "mean", ignore_index: int = -100):
        super().__init__(ignore_index=ignore_index)
        self.options.update(tversky_options(alpha=alpha, beta=beta, smooth=smooth, level=level,
                                            class_reduction=class_reduction))

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return tversky_loss(logits, target, **self.options)
