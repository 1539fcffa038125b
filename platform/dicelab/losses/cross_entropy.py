"""Cross entropy (`ce`) and the paper's weighted cross entropy (`wce`, eq. 2)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from dicelab.errors import ConfigError
from dicelab.losses import _checks
from dicelab.losses._inputs import LossInputs, class_weights, compute_precision, prepare
from dicelab.losses.base import Loss
from dicelab.losses.registry import LOSSES


def cross_entropy(logits: Tensor, target: Tensor, *, ignore_index: int = -100) -> Tensor:
    """Mean cross entropy over kept positions (binary logits: BCE with logits)."""
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        if inputs.binary:
            return F.binary_cross_entropy_with_logits(inputs.logits, inputs.target.to(inputs.logits.dtype))
        return F.cross_entropy(inputs.logits, inputs.target)


def weighted_cross_entropy(
    logits: Tensor, target: Tensor, *, class_weights: Sequence[float] | Tensor, ignore_index: int = -100
) -> Tensor:
    """-(1/N) sum_i alpha_{y_i} log p_{y_i}: divided by the number of kept positions N, not by the sum of
    the weights (which is what `torch.nn.functional.cross_entropy(weight=...)` does)."""
    with compute_precision(logits):
        inputs = prepare(logits, target, ignore_index)
        if inputs.size == 0:
            return inputs.zero()
        weights = _class_weights_tensor(class_weights, inputs)
        if inputs.binary:
            summed = F.binary_cross_entropy_with_logits(
                inputs.logits,
                inputs.target.to(inputs.logits.dtype),
                weight=weights[inputs.target],
                reduction="sum",
            )
        else:
            summed = F.cross_entropy(inputs.logits, inputs.target, weight=weights, reduction="sum")
        return summed / inputs.size


def _class_weights_tensor(weights: Sequence[float] | Tensor, inputs: LossInputs) -> Tensor:
    if not isinstance(weights, Tensor):
        weights = _checks.numbers("class_weights", weights, above=0.0, min_length=2)
    return class_weights("class_weights", weights, inputs)


def wce_class_weights(class_counts: Sequence[float] | Tensor, K: float) -> Tensor:
    """alpha_t = log10((n - n_t) / n_t + K) for each class t, n = sum of the counts (paper eq. 2).

    `class_counts` are the training split's per-class counts (binary: [negatives, positives]), all > 0.
    K must be > 0 and large enough that every alpha_t > 0: with a majority class t that needs
    K > 1 - (n - n_t) / n_t. K = 1 gives log10(n / n_t), the log inverse frequency. Returns float64
    weights; the loss casts them to its compute dtype.
    """
    counts = _checks.numbers("class_counts", class_counts, above=0.0, min_length=2)
    K = _checks.number("K", K, above=0.0)
    total = sum(counts)
    weights = [math.log10((total - count) / count + K) for count in counts]
    for index, (count, weight) in enumerate(zip(counts, weights, strict=True)):
        if weight <= 0:
            raise ConfigError(
                f"K must make every class weight log10((n - n_t)/n_t + K) > 0, but K={K:g} gives "
                f"{weight:.3g} for class {index} (count {count:g} of {total:g}); use K > "
                f"{1 - (total - count) / count:.4g}"
            )
    return torch.tensor(weights, dtype=torch.float64)


@LOSSES.register("ce")
class CrossEntropyLoss(Loss):
    """Cross entropy; binary logits use BCE with logits."""

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return cross_entropy(logits, target, **self.options)


@LOSSES.register("wce")
class WeightedCrossEntropyLoss(Loss):
    """Weighted cross entropy with the paper's weights `wce_class_weights(class_counts, K)`.

    `class_counts` comes from the training split; the trainer supplies it when a config leaves it out.
    """

    def __init__(
        self,
        *,
        K: float = 1.0,
        class_counts: Sequence[float] | Tensor | None = None,
        ignore_index: int = -100,
    ):
        super().__init__(ignore_index=ignore_index)
        if class_counts is None:
            raise ConfigError(
                "class_counts is required by loss 'wce' (the training split's per-class counts)"
            )
        # not persistent: loss settings come from the config, not from checkpoints
        self.register_buffer("class_weights", wce_class_weights(class_counts, K), persistent=False)
        self.K = K

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        if params.get("class_counts") is not None:
            super().validate(params)
            return
        _checks.number("K", params.get("K", 1.0), above=0.0)
        _checks.integer("ignore_index", params.get("ignore_index", -100))

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return weighted_cross_entropy(logits, target, class_weights=self.class_weights, **self.options)

    def extra_repr(self) -> str:
        weights = ", ".join(f"{w:.4g}" for w in self.class_weights.tolist())
        return f"K={self.K!r}, class_weights=[{weights}], {super().extra_repr()}"
