"""The set-overlap family: dice (eqs. 6-8), Tversky and self-adjusting dice `dsc` (eq. 12).

Each is 1 - (numerator + smooth) / (denominator + smooth), computed one-vs-rest for every class column
(binary logits: one column, the positive class) and then
- level="example": per position, averaged over kept positions (the per-example forms of the paper);
- level="batch": numerator and denominator summed over all kept positions first (the set-level form, eq. 8);
and finally reduced over classes with class_reduction "mean" or "sum" (the official code sums).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from dicelab.errors import ConfigError
from dicelab.losses import _checks
from dicelab.losses._inputs import (
    LossInputs,
    compute_precision,
    log_mass,
    loss_with_gradient,
    precision_floor,
    prepare,
    underflowed_rows,
)
from dicelab.losses.base import Loss
from dicelab.losses.registry import LOSSES


def dice_loss(
    logits: Tensor,
    target: Tensor,
    *,
    smooth: float = 1.0,
    square_denominator: bool = True,
    level: str = "example",
    class_reduction: str = "mean",
    ignore_index: int = -100,
) -> Tensor:
    """1 - (2 p y + smooth) / (p^k + y^k + smooth), k = 2 with `square_denominator` (Milletari) else 1."""
    options = dice_options(
        smooth=smooth, square_denominator=square_denominator, level=level, class_reduction=class_reduction
    )
    terms = _Terms.dice(square_denominator=options.pop("square_denominator"))
    return _overlap_loss(logits, target, terms, ignore_index=ignore_index, **options)


def dsc_loss(
    logits: Tensor,
    target: Tensor,
    *,
    alpha: float = 1.0,
    smooth: float = 1.0,
    square_denominator: bool = False,
    level: str = "example",
    class_reduction: str = "mean",
    ignore_index: int = -100,
) -> Tensor:
    """Self-adjusting dice: dice with p replaced by q = (1 - p)^alpha p; alpha = 0 is `dice_loss`.

    q is p exp(alpha log(1 - p)) with log(1 - p) from logits, and the gradient is taken in logit space:
    finite values and gradients for every alpha >= 0, also at p = 1 with 0 < alpha < 1, where
    (1 - p)^alpha has an infinite derivative with respect to p.
    """
    options = dsc_options(
        alpha=alpha,
        smooth=smooth,
        square_denominator=square_denominator,
        level=level,
        class_reduction=class_reduction,
    )
    terms = _Terms.dice(square_denominator=options.pop("square_denominator"), alpha=options.pop("alpha"))
    return _overlap_loss(logits, target, terms, ignore_index=ignore_index, **options)


def tversky_loss(
    logits: Tensor,
    target: Tensor,
    *,
    alpha: float = 0.5,
    beta: float = 0.5,
    smooth: float = 1.0,
    level: str = "example",
    class_reduction: str = "mean",
    ignore_index: int = -100,
) -> Tensor:
    """1 - (TP + smooth) / (TP + alpha FP + beta FN + smooth), TP = p y, FP = p (1 - y), FN = (1 - p) y.

    alpha, beta in [0, 1] with alpha + beta > 0; alpha = beta = 1/2 with smooth s/2 is dice (k = 1) with s,
    alpha = beta = 1 the Jaccard (Tanimoto) loss.
    """
    options = tversky_options(
        alpha=alpha, beta=beta, smooth=smooth, level=level, class_reduction=class_reduction
    )
    terms = _Terms.tversky(alpha=options.pop("alpha"), beta=options.pop("beta"))
    return _overlap_loss(logits, target, terms, ignore_index=ignore_index, **options)


def dice_options(
    *, smooth: float, square_denominator: bool, level: str, class_reduction: str
) -> dict[str, Any]:
    return {
        **_overlap_options(smooth, level, class_reduction),
        "square_denominator": _checks.flag("square_denominator", square_denominator),
    }


def dsc_options(*, alpha: float, **dice: Any) -> dict[str, Any]:
    return {"alpha": _checks.number("alpha", alpha, minimum=0.0), **dice_options(**dice)}


def tversky_options(
    *, alpha: float, beta: float, smooth: float, level: str, class_reduction: str
) -> dict[str, Any]:
    # weights of FP and FN relative to TP: above 1 an error would count more than a hit
    alpha = _checks.number("alpha", alpha, minimum=0.0, maximum=1.0)
    beta = _checks.number("beta", beta, minimum=0.0, maximum=1.0)
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

    @property
    def coefficients(self) -> tuple[int, float, float, float, float]:
        """(k, c, a, e, d)"""
        return self.power, self.numerator, self.negative_weight, self.positive_weight, self.positive_offset

    @classmethod
    def dice(cls, *, square_denominator: bool, alpha: float = 0.0) -> _Terms:
        # 2 q y / (q^k + y^k)
        return cls(
            numerator=2.0,
            negative_weight=1.0,
            positive_weight=1.0,
            positive_offset=1.0,
            power=2 if square_denominator else 1,
            alpha=alpha,
        )

    @classmethod
    def tversky(cls, *, alpha: float, beta: float) -> _Terms:
        # TP + alpha FP + beta FN is alpha p for y = 0 and p + beta (1 - p) = (1 - beta) p + beta for y = 1
        return cls(
            numerator=1.0, negative_weight=alpha, positive_weight=1.0 - beta, positive_offset=beta, power=1
        )


@dataclass(frozen=True)
class _Positives:
    """Softmax layout (M, C): the entries with y = 1, one per row, as flat indices."""

    row_start: Tensor  # (M,) flat index of each row's first entry
    flat_index: Tensor  # (M,) flat index of each row's target entry
    column: Tensor  # (M,) the target class

    @classmethod
    def of(cls, inputs: LossInputs) -> _Positives:
        step = inputs.num_classes
        row_start = torch.arange(0, inputs.size * step, step, device=inputs.target.device)
        return cls(row_start, row_start + inputs.target, inputs.target)


def _overlap_loss(
    logits: Tensor,
    target: Tensor,
    terms: _Terms,
    *,
    smooth: float,
    level: str,
    class_reduction: str,
    ignore_index: int,
) -> Tensor:
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        if inputs.binary:  # one column, the positive class: class_reduction has nothing to reduce
            y = inputs.target.to(inputs.logits.dtype)
            kernel = partial(_binary_overlap, y=y, terms=terms, smooth=smooth, level=level)
        else:
            kernel = partial(
                _softmax_overlap,
                positives=_Positives.of(inputs),
                terms=terms,
                smooth=smooth,
                level=level,
                class_reduction=class_reduction,
            )
        return loss_with_gradient(inputs.logits, kernel)


def _plus_smooth(denominator: Tensor, smooth: float) -> Tensor:
    """denominator + smooth, in place. Denominators are >= 0; with smooth = 0 an all-zero one (whose
    numerator is 0 too) is floored at the smallest normal float, so 0 / 0 becomes 0."""
    denominator.add_(smooth)
    return denominator if smooth > 0 else denominator.clamp_min_(torch.finfo(denominator.dtype).tiny)


def _binary_overlap(
    x: Tensor, need_gradient: bool, *, y: Tensor, terms: _Terms, smooth: float, level: str
) -> tuple[Tensor, Tensor | None]:
    alpha = terms.alpha
    if alpha == 0:
        q = torch.sigmoid(x)
    else:
        # q = p (1 - p)^alpha = exp(x + (1 + alpha) logsigmoid(-x)), as log p = x + logsigmoid(-x):
        # exact also where p or 1 - p underflows.
        log_complement = F.logsigmoid(-x)
        q = torch.add(x, log_complement, alpha=1.0 + alpha).exp_()

    k, c, a, e, d = terms.coefficients
    p_weight = a if e == a else torch.mul(y, e - a).add_(a)  # a for y = 0, e for y = 1
    denominator = (q * q if k == 2 else q).mul(p_weight).add_(y, alpha=d)
    numerator = torch.mul(q, y).mul_(c)
    if level == "batch":
        shifted = _plus_smooth(denominator.sum(), smooth)
        ratio = numerator.sum().add_(smooth).div_(shifted)
        loss, scale = 1.0 - ratio, 1.0
    else:
        shifted = _plus_smooth(denominator, smooth)
        ratio = numerator.add_(smooth).div_(shifted)
        loss, scale = 1.0 - ratio.mean(), 1.0 / x.shape[0]
    if not need_gradient:
        return loss, None
    # d loss / dq = scale (ratio d denominator/dq - d numerator/dq) / (denominator + smooth)
    slope = p_weight * k * (q if k == 2 else 1.0)
    dq = torch.sub(ratio * slope, y, alpha=c).mul_(scale).div_(shifted)
    # dq/dx = q (1 - p - alpha p) with 1 - p = sigmoid(-x) (= exp(logsigmoid(-x)))
    if alpha == 0:
        return loss, dq.mul_(q).mul_(torch.sigmoid(-x))
    return loss, dq.mul_(q).mul_(log_complement.exp_().sub_(torch.sigmoid(x), alpha=alpha))


def _softmax_ratio_and_gradient(
    q: Tensor,
    need_gradient: bool,
    *,
    positives: _Positives,
    terms: _Terms,
    smooth: float,
    level: str,
    class_reduction: str,
) -> tuple[Tensor, Tensor | None]:
    """The loss from q (M, K) and, if asked, its derivative with respect to q (q stays unchanged).

    Most entries have y = 0; they are computed densely in one buffer, updated in place (on CPU a fresh
    (M, K) buffer costs more than the arithmetic), and the y = 1 entries are then overwritten.
    """
    num_positions, num_classes = q.shape
    class_weight = 1.0 / num_classes if class_reduction == "mean" else 1.0
    k, c, a, e, d = terms.coefficients
    q_positive = torch.take(q, positives.flat_index)
    q_positive_power = q_positive * q_positive if k == 2 else q_positive
    numerator_positive = c * q_positive
    denominator_positive = e * q_positive_power + d
    buffer = (q * q).mul_(a) if k == 2 else q * a  # denominators of the y = 0 entries: a q^k

    if level == "batch":
        # sums over positions per class: denominators a q^k plus e q^k + d - a q^k at the y = 1 entries
        positive_extra = denominator_positive - a * q_positive_power
        denominator = buffer.sum(0).index_add_(0, positives.column, positive_extra)
        numerator = q.new_zeros(num_classes).index_add_(0, positives.column, numerator_positive)
        shifted = _plus_smooth(denominator, smooth)
        ratio = numerator.add_(smooth).div_(shifted)
        loss = class_weight * (num_classes - ratio.sum())
        if not need_gradient:
            return loss, None
        # d loss / dq = w (ratio d denominator/dq - d numerator/dq) / (denominator + smooth), per class
        slope = ratio.mul(class_weight * k).div_(shifted)
        gradient = torch.mul(q, slope, out=buffer) if k == 2 else buffer.copy_(slope.expand_as(buffer))
        gradient.mul_(a)
        positive_slope = slope[positives.column] * e * (q_positive if k == 2 else 1.0)
        gradient.view(-1).index_copy_(
            0, positives.flat_index, positive_slope - class_weight * c / shifted[positives.column]
        )
        return loss, gradient

    inverse = _plus_smooth(buffer, smooth).reciprocal_()  # 1 / (denominator + smooth)
    inverse_positive = _plus_smooth(denominator_positive, smooth).reciprocal_()
    ratio_positive = (numerator_positive + smooth).mul_(inverse_positive)
    ratio = inverse.mul_(smooth)  # (0 + smooth) / (denominator + smooth), right where y = 0
    # the sum with the y = 1 entries swapped in; the buffer itself keeps the y = 0 formula there
    ratio_sum = ratio.sum() - torch.take(ratio, positives.flat_index).sum() + ratio_positive.sum()
    scale = class_weight / num_positions
    loss = class_weight * num_classes - ratio_sum * scale
    if not need_gradient:
        return loss, None
    # d loss / dq = scale (ratio d denominator/dq - d numerator/dq) / (denominator + smooth); where y = 0
    # that is scale a k q^(k-1) smooth / (a q^k + smooth)^2 = (ratio^2 / smooth) scale a k q^(k-1).
    gradient = ratio.square_().mul_(scale * a * k / smooth) if smooth > 0 else ratio.zero_()
    if k == 2:
        gradient.mul_(q)
    positive_slope = ratio_positive * e * k * (q_positive if k == 2 else 1.0) - c
    gradient.view(-1).index_copy_(0, positives.flat_index, positive_slope.mul_(inverse_positive).mul_(scale))
    return loss, gradient


def _softmax_overlap(
    x: Tensor, need_gradient: bool, *, positives: _Positives, terms: _Terms, **reduction: Any
) -> tuple[Tensor, Tensor | None]:
    ratio = partial(_softmax_ratio_and_gradient, positives=positives, terms=terms, **reduction)
    alpha, row_start = terms.alpha, positives.row_start
    p = torch.softmax(x, dim=-1)
    if alpha == 0:
        loss, dq = ratio(p, need_gradient)
        if dq is None:
            return loss, None
        a = dq.mul_(p)  # softmax backward: a - p sum_c a_c with a = dq p
        return loss, a.addcmul_(p, a.sum(-1, keepdim=True), value=-1.0)

    # Each row gets a pivot class: the one class with p > 1/2 if there is one, else class 0. Every other
    # class has p <= 1/2, where 1 - p is accurate as it is; the pivot's 1 - p is the sum of the other
    # classes' p, free of cancellation. (M, K) temporaries are reused: on CPU a fresh one costs more than
    # the arithmetic on it.
    buffer = torch.gt(p, 0.5, out=torch.empty_like(p))  # 1.0 for a class with p > 1/2, else 0.0
    class_ids = torch.arange(p.shape[-1], dtype=p.dtype, device=p.device)
    if p.shape[-1] <= 256:
        # At most one product per row is nonzero, and 0/1 times a class id below 256 is exact in every
        # reduced-precision matmul mode (TF32, bf16): the matrix-vector product is exact and faster.
        pivot_class = torch.mv(buffer, class_ids).long()
    else:
        pivot_class = buffer.mul_(class_ids).sum(-1).long()
    pivot = row_start + pivot_class  # flat index of each row's pivot
    p_pivot = torch.take(p, pivot)
    others = buffer.copy_(p)
    others.view(-1).index_fill_(0, pivot, 0.0)
    rest = others.sum(-1)  # 1 - p_pivot
    # Rows where 1 - p_pivot is too small for float precision get their pivot terms in log space.
    exact = underflowed_rows(rest)
    rest.clamp_min_(precision_floor(p.dtype))
    complement = torch.mul(p, -1.0, out=buffer).add_(1.0)
    complement.view(-1).index_copy_(0, pivot, rest)
    if alpha in (1.0, 2.0):  # whole powers by multiplication: exact, and saves a log and an exp
        q = complement.pow(int(alpha)).mul_(p)  # (1 - p)^alpha p
    else:
        q = torch.log(complement).mul_(alpha).exp_().mul_(p)
    if exact.numel():
        exact_x = x[exact]
        not_pivot = torch.ones_like(exact_x).scatter_(-1, pivot_class[exact].unsqueeze(-1), 0.0)
        log_rest = log_mass(exact_x, not_pivot)  # log(1 - p_pivot)
        q.view(-1).index_copy_(0, pivot[exact], torch.exp(alpha * log_rest).mul_(p_pivot[exact]))
    loss, dq = ratio(q, need_gradient)
    if dq is None:
        return loss, None

    # d loss/dx_j = sum_c h_c (delta_cj - p_j) with h_c = a_c (1 - alpha r_c), a = dq * q and
    # r_c = p_c / (1 - p_c); r_pivot is unbounded as p_pivot -> 1, so the pivot's own entry is regrouped
    # into bounded terms: a_pivot (1 - p_pivot - alpha p_pivot) - p_pivot sum_{c != pivot} h_c.
    a = dq.mul_(q)
    a_pivot = torch.take(a, pivot)
    h = a.addcmul_(a, torch.div(p, complement, out=q), value=-alpha)
    h_pivot = torch.take(h, pivot)
    h.view(-1).index_fill_(0, pivot, 0.0)
    h_rest = h.sum(-1)  # sum over the classes but the pivot
    if exact.numel():
        exact_h = h[exact]
    gradient = h.addcmul_(p, (h_rest + h_pivot).unsqueeze(-1), value=-1.0)
    if exact.numel():
        # p_j h_pivot = p_j a_pivot - alpha a_pivot p_pivot p_j / (1 - p_pivot), the last ratio in log space
        share = torch.log_softmax(exact_x, dim=-1).sub_(log_rest.unsqueeze(-1))
        # (NaN from -inf - -inf where every other logit is -inf: there p_j / (1 - p_pivot) is 0 / 0 -> 0)
        share = share.masked_fill_(not_pivot == 0, -math.inf).exp_().nan_to_num_(nan=0.0)
        scale = (alpha * a_pivot[exact] * p_pivot[exact]).unsqueeze(-1)
        gradient[exact] = exact_h.addcmul_(
            p[exact], (h_rest + a_pivot)[exact].unsqueeze(-1), value=-1.0
        ).addcmul_(share, scale)
    pivot_gradient = a_pivot * (rest - alpha * p_pivot) - p_pivot * h_rest
    return loss, gradient.view(-1).index_copy_(0, pivot, pivot_gradient).view_as(gradient)


class _OverlapLoss(Loss):
    """The module form of one pure function above: the same keyword parameters and defaults (the function's
    signature is their one declaration), checked once on construction and passed on every call."""

    loss_function: ClassVar[Callable[..., Tensor]]
    check_options: ClassVar[Callable[..., dict[str, Any]]]  # the function's parameters -> checked options

    def __init__(self, *, ignore_index: int = -100, **params: Any):
        super().__init__(ignore_index=ignore_index)
        self.options.update(type(self).check_options(**{**self._defaults(), **params}))

    @classmethod
    def _keyword_parameters(cls) -> dict[str, inspect.Parameter]:
        parameters = inspect.signature(cls.loss_function).parameters.values()
        return {p.name: p for p in parameters if p.kind is p.KEYWORD_ONLY}

    @classmethod
    def _defaults(cls) -> dict[str, Any]:
        return {name: p.default for name, p in cls._keyword_parameters().items() if name != "ignore_index"}

    @classmethod
    def parameter_names(cls) -> list[str]:
        return sorted(cls._keyword_parameters())

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return type(self).loss_function(logits, target, **self.options)


@LOSSES.register("dice")
class DiceLoss(_OverlapLoss):
    """Dice loss (`dice_loss`); `square_denominator` (default True) squares p in the denominator (Milletari
    et al.)."""

    loss_function = staticmethod(dice_loss)
    check_options = staticmethod(dice_options)


@LOSSES.register("dsc")
class SelfAdjustingDiceLoss(_OverlapLoss):
    """Self-adjusting dice loss, the paper's DSC (`dsc_loss`); `alpha` >= 0 is the exponent of (1 - p)."""

    loss_function = staticmethod(dsc_loss)
    check_options = staticmethod(dsc_options)


@LOSSES.register("tversky")
class TverskyLoss(_OverlapLoss):
    """Tversky loss (`tversky_loss`); `alpha` weighs false positives and `beta` false negatives (both in
    [0, 1], sum > 0)."""

    loss_function = staticmethod(tversky_loss)
    check_options = staticmethod(tversky_options)
