"""The set-overlap family: dice (eqs. 6-8), Tversky (eq. 10) and self-adjusting dice `dsc` (eq. 12).

Each is 1 - (numerator + smooth) / (denominator + smooth), computed one-vs-rest for every class column
(binary logits: one column, the positive class) and then
- level="example": per position, averaged over kept positions (the per-example forms of the paper);
- level="batch": numerator and denominator summed over all kept positions first (the set-level form, eq. 8);
and finally reduced over classes with class_reduction "mean" or "sum" (the official code sums).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from dicelab.errors import ConfigError
from dicelab.losses import _checks
from dicelab.losses._base import LOSSES, Loss
from dicelab.losses._inputs import (
    LossInputs,
    compute_precision,
    log_mass,
    loss_with_gradient,
    prepare,
    underflowed_rows,
)


def dice_loss(logits: Tensor, target: Tensor, *, smooth: float = 1.0, square_denominator: bool = True,
              level: str = "example", class_reduction: str = "mean", ignore_index: int = -100) -> Tensor:
    """1 - (2 p y + smooth) / (p^k + y^k + smooth), k = 2 with `square_denominator` (Milletari) else 1."""
    options = dice_options(smooth=smooth, square_denominator=square_denominator, level=level,
                           class_reduction=class_reduction)
    terms = _Terms.dice(square_denominator=options.pop("square_denominator"))
    return _overlap_loss(logits, target, terms, ignore_index=ignore_index, **options)


def dsc_loss(logits: Tensor, target: Tensor, *, alpha: float = 1.0, smooth: float = 1.0,
             square_denominator: bool = False, level: str = "example", class_reduction: str = "mean",
             ignore_index: int = -100) -> Tensor:
    """Self-adjusting dice: dice with p replaced by q = (1 - p)^alpha p; alpha = 0 is `dice_loss`.

    q is p exp(alpha log(1 - p)) with log(1 - p) from logits, and the gradient is taken in logit space:
    finite values and gradients for every alpha >= 0, also at p = 1 with 0 < alpha < 1, where
    (1 - p)^alpha has an infinite derivative with respect to p.
    """
    options = dsc_options(alpha=alpha, smooth=smooth, square_denominator=square_denominator, level=level,
                          class_reduction=class_reduction)
    terms = _Terms.dice(square_denominator=options.pop("square_denominator"), alpha=options.pop("alpha"))
    return _overlap_loss(logits, target, terms, ignore_index=ignore_index, **options)


def tversky_loss(logits: Tensor, target: Tensor, *, alpha: float = 0.5, beta: float = 0.5,
                 smooth: float = 1.0, level: str = "example", class_reduction: str = "mean",
                 ignore_index: int = -100) -> Tensor:
    """1 - (TP + smooth) / (TP + alpha FP + beta FN + smooth), TP = p y, FP = p (1 - y), FN = (1 - p) y.

    alpha, beta >= 0 with alpha + beta > 0; alpha = beta = 1/2 with smooth s/2 is dice (k = 1) with s.
    """
    options = tversky_options(alpha=alpha, beta=beta, smooth=smooth, level=level,
                              class_reduction=class_reduction)
    terms = _Terms.tversky(alpha=options.pop("alpha"), beta=options.pop("beta"))
    return _overlap_loss(logits, target, terms, ignore_index=ignore_index, **options)


def dice_options(*, smooth: float, square_denominator: bool, level: str,
                 class_reduction: str) -> dict[str, Any]:
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


@dataclass(frozen=True)
class _Terms:
    """Numerator and denominator of one position and class, with q = (1 - p)^alpha p (p for alpha = 0):
    y = 0: 0 and a q^k;  y = 1: c q and e q^k + d."""

    numerator: float  # c
    negative_weight: float  # a
    positive_weight: float  # e
    positive_offset: float  # d
    power: int  # k
    alpha: float = 0.0

    @classmethod
    def dice(cls, *, square_denominator: bool, alpha: float = 0.0) -> _Terms:
        # 2 q y / (q^k + y^k)
        return cls(numerator=2.0, negative_weight=1.0, positive_weight=1.0, positive_offset=1.0,
                   power=2 if square_denominator else 1, alpha=alpha)

    @classmethod
    def tversky(cls, *, alpha: float, beta: float) -> _Terms:
        # TP + alpha FP + beta FN is alpha p for y = 0 and p + beta (1 - p) = (1 - beta) p + beta for y = 1
        return cls(numerator=1.0, negative_weight=alpha, positive_weight=1.0 - beta, positive_offset=beta, power=1)


@dataclass(frozen=True)
class _Positives:
    """The (position, class) entries with y = 1, as flat indices into the (M, K) one-vs-rest layout."""

    flat_index: Tensor  # (P,)
    column: Tensor  # (P,) their class column

    @classmethod
    def of(cls, inputs: LossInputs) -> _Positives:
        if inputs.binary:  # one column, the positive class
            rows = inputs.target.nonzero().squeeze(-1)
            return cls(rows, torch.zeros_like(rows))
        rows = torch.arange(inputs.size, device=inputs.target.device)
        return cls(rows * inputs.num_classes + inputs.target, inputs.target)


def _overlap_loss(logits: Tensor, target: Tensor, terms: _Terms, *, smooth: float, level: str,
                  class_reduction: str, ignore_index: int) -> Tensor:
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        ratio = partial(_ratio_and_gradient, positives=_Positives.of(inputs), terms=terms, smooth=smooth,
                        level=level, class_reduction=class_reduction)
        kernel = _binary_overlap if inputs.binary else _softmax_overlap
        return loss_with_gradient(inputs.logits, partial(kernel, ratio=ratio, alpha=terms.alpha))


def _ratio_and_gradient(q: Tensor, need_gradient: bool, *, positives: _Positives, terms: _Terms,
                        smooth: float, level: str, class_reduction: str) -> tuple[Tensor, Tensor | None]:
    """The loss from q (M, K) and, if asked, its derivative with respect to q (q stays unchanged).

    Most entries have y = 0; they are computed densely in one buffer, updated in place (on CPU a fresh
    (M, K) buffer costs more than the arithmetic), and the y = 1 entries are then overwritten.
    """
    num_positions, num_classes = q.shape
    class_weight = 1.0 / num_classes if class_reduction == "mean" else 1.0
    tiny = torch.finfo(q.dtype).tiny  # a floor that only matters for smooth = 0 and 0 / 0
    k, c, a, e, d = terms.power, terms.numerator, terms.negative_weight, terms.positive_weight, terms.positive_offset
    q_positive = q.view(-1)[positives.flat_index]
    q_positive_power = q_positive**k
    numerator_positive = c * q_positive
    denominator_positive = e * q_positive_power + d
    buffer = (q * q if k == 2 else q.clone()).mul_(a)  # denominators of the y = 0 entries: a q^k

    if level == "batch":
        # sums over positions per class: denominators a q^k plus e q^k + d - a q^k at the y = 1 entries
        denominator = buffer.sum(0).index_add_(0, positives.column, denominator_positive - a * q_positive_power)
        numerator = q.new_zeros(num_classes).index_add_(0, positives.column, numerator_positive)
        shifted = denominator.add_(smooth).clamp_min_(tiny)
        ratio = numerator.add_(smooth).div_(shifted)
        loss = class_weight * (num_classes - ratio.sum())
        if not need_gradient:
            return loss, None
        # d loss / dq = w (ratio d denominator/dq - d numerator/dq) / (denominator + smooth), per class
        slope = ratio.mul(class_weight * k).div_(shifted)
        gradient = torch.mul(q, slope, out=buffer) if k == 2 else buffer.copy_(slope.expand_as(buffer))
        gradient.mul_(a)
        positive_slope = slope[positives.column] * e * (q_positive if k == 2 else 1.0)
        gradient.view(-1)[positives.flat_index] = positive_slope - class_weight * c / shifted[positives.column]
        return loss, gradient

    inverse = buffer.add_(smooth).clamp_min_(tiny).reciprocal_()  # 1 / (denominator + smooth)
    inverse_positive = (denominator_positive + smooth).clamp_min_(tiny).reciprocal_()
    ratio_positive = (numerator_positive + smooth).mul_(inverse_positive)
    ratio = inverse.mul_(smooth)  # (0 + smooth) / (denominator + smooth) where y = 0
    ratio.view(-1)[positives.flat_index] = ratio_positive
    scale = class_weight / num_positions
    loss = class_weight * num_classes - ratio.sum() * scale
    if not need_gradient:
        return loss, None
    # d loss / dq = scale (ratio d denominator/dq - d numerator/dq) / (denominator + smooth); where y = 0
    # that is scale a k q^(k-1) smooth / (a q^k + smooth)^2 = (ratio^2 / smooth) scale a k q^(k-1).
    gradient = ratio.square_().mul_(scale * a * k / smooth) if smooth > 0 else ratio.zero_()
    if k == 2:
        gradient.mul_(q)
    positive_slope = ratio_positive * e * k * (q_positive if k == 2 else 1.0) - c
    gradient.view(-1)[positives.flat_index] = positive_slope.mul_(inverse_positive).mul_(scale)
    return loss, gradient


RatioAndGradient = Callable[[Tensor, bool], tuple[Tensor, Tensor | None]]


def _binary_overlap(x: Tensor, need_gradient: bool, *, ratio: RatioAndGradient,
                    alpha: float) -> tuple[Tensor, Tensor | None]:
    x = x.unsqueeze(-1)
    if alpha == 0:
        p = torch.sigmoid(x)
        loss, dq = ratio(p, need_gradient)
        return loss, None if dq is None else dq.mul_(p).mul_(torch.sigmoid(-x)).squeeze(-1)
    # q = p (1 - p)^alpha = exp(x + (1 + alpha) logsigmoid(-x)), as log p = x + logsigmoid(-x): exact
    # also where p or 1 - p underflows.
    log_complement = F.logsigmoid(-x)
    q = torch.add(x, log_complement, alpha=1.0 + alpha).exp_()
    loss, dq = ratio(q, need_gradient)
    if dq is None:
        return loss, None
    # dq/dx = q (1 - p - alpha p), with 1 - p = exp(logsigmoid(-x))
    slope = log_complement.exp_().sub_(torch.sigmoid(x), alpha=alpha)
    return loss, dq.mul_(q).mul_(slope).squeeze(-1)


def _softmax_overlap(x: Tensor, need_gradient: bool, *, ratio: RatioAndGradient,
                     alpha: float) -> tuple[Tensor, Tensor | None]:
    p = torch.softmax(x, dim=-1)
    if alpha == 0:
        loss, dq = ratio(p, need_gradient)
        if dq is None:
            return loss, None
        a = dq.mul_(p)  # softmax backward: a - p sum_c a_c with a = dq p
        return loss, a.addcmul_(p, a.sum(-1, keepdim=True), value=-1.0)

    # 1 - p without cancellation: for a class with p <= 1/2 as it is; for the one class of a row with
    # p > 1/2 (the "top"), as the mass of the row's other classes (a sum of positive terms).
    small = (0.5 - p).sign_().add_(1.0).clamp_max_(1.0)  # 1 where p <= 1/2, 0 for a top class
    small_p = p * small
    rest = small_p.sum(-1, keepdim=True)  # 1 - p_top in rows with a top class
    log_complement = (1.0 - p).sub_(rest).mul_(small).add_(rest).log_()
    exact_rows = underflowed_rows(rest.squeeze(-1))  # 1 - p_top below float precision: redo in log space
    if exact_rows.numel():
        log_rest = log_mass(x[exact_rows], small[exact_rows]).unsqueeze(-1)
        log_complement[exact_rows] = torch.where(small[exact_rows] > 0, log_complement[exact_rows], log_rest)
    q = log_complement.mul_(alpha).exp_().mul_(p)  # (1 - p)^alpha p
    loss, dq = ratio(q, need_gradient)
    if dq is None:
        return loss, None

    # dq_c/dx_j = q_c (delta_cj - p_j)(1 - alpha r_c) with r_c = p_c / (1 - p_c). r_top is unbounded as
    # p_top -> 1, so the top class's alpha term is regrouped: a_top r_top (delta_top,j - p_j) is
    # a_top p_top (-1 for j = top, -p_j / (1 - p_top) otherwise), all bounded. Buffers are reused.
    a = dq.mul_(q)
    a_sum = a.sum(-1, keepdim=True)
    top_term = torch.sub(p, small_p, out=q).mul_(a).sum(-1, keepdim=True)  # a_top p_top, 0 without a top
    ar = torch.div(small_p, q.copy_(small_p).neg_().add_(1.0), out=q).mul_(a)  # a_c r_c, 0 at the top
    share = small_p.div_(rest)  # p_j / (1 - p_top)
    if exact_rows.numel():
        log_share = torch.log_softmax(x[exact_rows], dim=-1).sub_(log_rest)
        share[exact_rows] = log_share.masked_fill_(small[exact_rows] == 0, -math.inf).exp_()
    alpha_terms = share.add_(small).sub_(1.0).mul_(top_term).sub_(ar).addcmul_(p, ar.sum(-1, keepdim=True))
    return loss, a.addcmul_(p, a_sum, value=-1.0).add_(alpha_terms, alpha=alpha)


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
