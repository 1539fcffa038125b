"""Precision where p rounds to 0 or 1 in float32: results must match float64, where nothing underflows."""

from __future__ import annotations

import pytest
import torch

from dicelab.losses import build_loss

# Rows whose top class wins by 150 (1 - p_top = e^-150 underflows in float32, not in float64), a row with
# a tie, and ordinary rows.
SOFTMAX_LOGITS = torch.tensor(
    [
        [100.0, -50.0, -60.0, -55.0],
        [-40.0, 100.0, -50.0, -100.0],
        [-100.0, -100.0, -100.0, 50.0],
        [3.0, 3.0, -1.0, 0.0],
        [0.5, -0.2, 1.0, 0.1],
        [-2.0, 1.0, 0.0, 2.5],
    ],
    dtype=torch.float64,
)
SOFTMAX_TARGETS = [
    torch.tensor([0, 1, 3, 0, 2, 3]),  # right with margin 150
    torch.tensor([1, 0, 0, 1, 2, 1]),  # wrong with margin 150
]
BINARY_LOGITS = torch.tensor([100.0, -100.0, 95.0, -90.0, 0.3, -1.2], dtype=torch.float64)
BINARY_TARGETS = [torch.tensor([1, 0, 1, 0, 1, 0]), torch.tensor([0, 1, 1, 0, 0, 1])]

LOSSES = [
    ("dsc", {"alpha": 0.01}),
    ("dsc", {"alpha": 0.5, "square_denominator": True}),
    ("dsc", {"alpha": 2.0, "level": "batch"}),
    ("focal", {"gamma": 0.01}),
    ("focal", {"gamma": 0.5}),
    ("dice", {}),
    ("tversky", {"alpha": 0.3, "beta": 0.7}),
    ("ce", {}),
]


def value_and_gradient(loss, logits, target):
    logits = logits.clone().requires_grad_(True)
    value = loss(logits, target)
    return value, torch.autograd.grad(value, logits)[0]


@pytest.mark.parametrize(("name", "params"), LOSSES)
@pytest.mark.parametrize("layout", ["softmax", "binary"])
def test_float32_matches_float64_where_probabilities_round_to_0_or_1(name, params, layout) -> None:
    logits, targets = (
        (SOFTMAX_LOGITS, SOFTMAX_TARGETS) if layout == "softmax" else (BINARY_LOGITS, BINARY_TARGETS)
    )
    loss = build_loss(name, **params)
    for target in targets:
        value32, gradient32 = value_and_gradient(loss, logits.float(), target)
        value64, gradient64 = value_and_gradient(loss, logits, target)
        assert torch.isfinite(value32) and torch.isfinite(gradient32).all()
        torch.testing.assert_close(value32.double(), value64, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(gradient32.double(), gradient64, rtol=1e-4, atol=1e-7)


def test_small_alpha_keeps_the_self_adjusting_factor_of_a_confident_class() -> None:
    """With alpha = 0.01, (1 - p)^alpha at 1 - p = e^-150 is e^-1.5: computing it from a 1 - p that
    underflowed to 0 would give 0 and change the loss."""
    logits = torch.tensor([[150.0, 0.0]])
    target = torch.tensor([0])
    loss = build_loss("dsc", alpha=0.01, smooth=1.0)
    # class 0: q = e^-1.5 (y = 1): 1 - (2q + 1)/(q + 2); class 1: q = e^-150 ~ 0 (y = 0): 0. Mean over 2.
    q = torch.exp(torch.tensor(-1.5, dtype=torch.float64))
    expected = (1 - (2 * q + 1) / (q + 2)) / 2
    torch.testing.assert_close(loss(logits, target).double(), expected, rtol=1e-6, atol=0.0)


@pytest.mark.parametrize("mask", [-float("inf"), torch.finfo(torch.float32).min, -1e4])
@pytest.mark.parametrize(
    ("name", "params"), [*LOSSES, ("wce", {"class_counts": [2, 1, 1]}), ("focal", {"gamma": 0.0})]
)
def test_masked_logits_of_other_classes_keep_everything_finite(mask, name, params) -> None:
    """Span extraction masks invalid positions with -inf or the dtype's minimum."""
    logits = torch.tensor([[5.0, mask, mask], [mask, 0.5, -0.5], [2.0, 1.0, mask]])
    value, gradient = value_and_gradient(build_loss(name, **params), logits, torch.tensor([0, 1, 1]))
    assert torch.isfinite(value) and torch.isfinite(gradient).all()


@pytest.mark.parametrize(("name", "params"), LOSSES)
def test_a_target_masked_with_minus_infinity_keeps_gradients_finite(name, params) -> None:
    logits = torch.tensor([[0.0, 1.0, -float("inf")], [3.0, 0.0, -1.0]])
    value, gradient = value_and_gradient(build_loss(name, **params), logits, torch.tensor([2, 0]))
    assert torch.isfinite(gradient).all()
    assert torch.isfinite(value) or name in ("ce", "focal")  # -log 0: infinite, as in torch
