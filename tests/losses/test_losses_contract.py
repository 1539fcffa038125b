"""The contract every registered loss passes (`dicelab.contracts.losses`, Optuna-style): one subclass per
built-in loss; `dicelab plugins check` runs the same checks on a plugin's losses.

A subclass names the loss, the parameter sets to check (`configs`) and the settings of the training test.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest
import torch

from dicelab.contracts.losses import NUM_CLASSES, LossContract, loss_and_gradient, make_batch
from dicelab.losses import build_loss, functional


class BuiltinLossContract(LossContract):
    """The importable contract (`dicelab.contracts.losses`) plus what only the built-ins have: a reference
    formula (tests/losses/conftest.py) and a pure function in `dicelab.losses.functional`."""

    functional_name: ClassVar[str]

    def test_matches_the_reference_formula_with_gradients(self, reference) -> None:
        for config, layout in self.cases():
            logits, target = make_batch(layout)
            params = self.params(config, 2 if layout.startswith("binary") else NUM_CLASSES)
            value, gradient = loss_and_gradient(self.build(config, layout), logits, target)
            expected, expected_gradient = loss_and_gradient(
                lambda x, t, p=params: reference(self.name, x, t, **p), logits, target
            )
            torch.testing.assert_close(value, expected, msg=f"{config} {layout}")
            torch.testing.assert_close(gradient, expected_gradient, msg=f"{config} {layout}")

    def test_module_equals_the_pure_function(self) -> None:
        function = getattr(functional, self.functional_name)
        for config, layout in self.cases():
            logits, target = make_batch(layout)
            loss = self.build(config, layout)
            params = self.params(config, 2 if layout.startswith("binary") else NUM_CLASSES)
            if self.name == "wce":
                params = {"class_weights": loss.class_weights, **config}
                params.pop("K", None)
            assert torch.equal(loss(logits, target), function(logits, target, **params))


SMOOTHING_VARIANTS = [
    {"level": "example", "class_reduction": "mean"},
    {"level": "batch", "class_reduction": "sum", "smooth": 0.5},
    {"level": "example", "class_reduction": "sum", "smooth": 0.0},
    {"level": "batch", "class_reduction": "mean", "smooth": 0.0},
]


class TestCrossEntropy(BuiltinLossContract):
    name = "ce"
    functional_name = "cross_entropy"
    configs: ClassVar = [{}]


class TestWeightedCrossEntropy(BuiltinLossContract):
    name = "wce"
    functional_name = "weighted_cross_entropy"
    configs: ClassVar = [{"K": 1.0}, {"K": 3.5}]
    train_params: ClassVar = {"K": 3.0}

    def params(self, config: dict[str, Any], num_classes: int) -> dict[str, Any]:
        return {"class_counts": [40, 7, 3, 10][:num_classes], **config}


class TestFocal(BuiltinLossContract):
    name = "focal"
    functional_name = "focal_loss"
    configs: ClassVar = [
        {"gamma": 2.0},
        {"gamma": 0.01},
        {"gamma": 0.5},
        {"gamma": 1.0},
        {"gamma": 0.0},
    ]
    train_params: ClassVar = {"gamma": 2.0}

    def test_per_class_alpha(self, reference) -> None:
        for layout, alpha in [("binary", 0.25), ("binary", [0.3, 0.7]), ("softmax", [0.1, 0.2, 0.3, 0.4])]:
            logits, target = make_batch(layout)
            value, gradient = loss_and_gradient(build_loss("focal", gamma=1.5, alpha=alpha), logits, target)
            expected = loss_and_gradient(
                lambda x, t, a=alpha: reference("focal", x, t, gamma=1.5, alpha=a), logits, target
            )
            torch.testing.assert_close((value, gradient), expected)
        with pytest.raises(ValueError, match=r"^alpha as one number weights the positive class"):
            build_loss("focal", alpha=0.25)(*make_batch("softmax"))
        with pytest.raises(ValueError, match=r"^alpha has 2 entries but the logits have 4 classes"):
            build_loss("focal", alpha=[0.5, 0.5])(*make_batch("softmax"))


class TestDice(BuiltinLossContract):
    name = "dice"
    functional_name = "dice_loss"
    configs: ClassVar = [
        {},
        *(
            {"square_denominator": square, **variant}
            for square in (True, False)
            for variant in SMOOTHING_VARIANTS
        ),
    ]
    train_params: ClassVar = {"level": "batch"}


class TestTversky(BuiltinLossContract):
    name = "tversky"
    functional_name = "tversky_loss"
    configs: ClassVar = [
        {},
        {"alpha": 0.3, "beta": 0.7},
        {"alpha": 1.0, "beta": 0.01, "level": "batch"},
        {"alpha": 0.01, "beta": 1.0, "smooth": 0.0, "class_reduction": "sum"},
        {"alpha": 1.0, "beta": 0.5, "smooth": 0.0, "level": "batch"},
    ]
    train_params: ClassVar = {"alpha": 0.4, "beta": 0.6}


class TestSelfAdjustingDice(BuiltinLossContract):
    name = "dsc"
    functional_name = "dsc_loss"
    configs: ClassVar = [
        {},
        *({"alpha": alpha} for alpha in (0.01, 0.5, 2.0)),
        *({"alpha": alpha, "square_denominator": True} for alpha in (0.01, 1.0)),
        *({"alpha": 0.5, **variant} for variant in SMOOTHING_VARIANTS),
        {"alpha": 0.0, "square_denominator": True},
    ]
    # Per example, (1 - p)^alpha p peaks at p = 1 / (1 + alpha): with alpha >= 0.5 positives settle near
    # the 0.5 threshold (by design, the paper's Figure 1). The set-level form with a small alpha trains well.
    train_params: ClassVar = {"alpha": 0.1, "level": "batch"}

    def highest_pushed_down_logit(self, config: dict[str, Any]) -> float:
        # q = (1 - p)^alpha p falls for p > 1 / (1 + alpha), i.e. logits above -log(alpha): there DSC pushes a
        # negative on towards p = 1, as the published formula (and the official code) does.
        alpha = config.get("alpha", 1.0)
        return 6.0 if alpha == 0 else min(6.0, -math.log(alpha) - 0.05)
