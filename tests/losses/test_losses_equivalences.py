"""Identities between the losses, on values and gradients (float64)."""

from __future__ import annotations

import pytest
import torch

from dicelab.losses import build_loss


def batches():
    generator = torch.Generator().manual_seed(11)
    target = torch.tensor([0, 1, 1, 0, 2, 2, 0, 1, -100, 0])
    yield "binary", 3 * torch.randn(10, generator=generator, dtype=torch.float64), target.clamp_max(1)
    yield "softmax", 3 * torch.randn(10, 3, generator=generator, dtype=torch.float64), target
    yield "sequence", 3 * torch.randn(2, 5, 3, generator=generator, dtype=torch.float64), target.view(2, 5)


def assert_same_loss(first, second) -> None:
    for layout, logits, target in batches():
        values, gradients = [], []
        for loss in (first, second):
            x = logits.clone().requires_grad_(True)
            value = loss(x, target)
            values.append(value)
            gradients.append(torch.autograd.grad(value, x)[0])
        torch.testing.assert_close(values[0], values[1], rtol=1e-12, atol=1e-14, msg=layout)
        torch.testing.assert_close(gradients[0], gradients[1], rtol=1e-12, atol=1e-14, msg=layout)


def test_focal_with_gamma_0_is_cross_entropy() -> None:
    assert_same_loss(build_loss("focal", gamma=0.0), build_loss("ce"))


@pytest.mark.parametrize("counts", [[5, 5], [7, 7, 7]])
def test_weighted_cross_entropy_with_equal_weights_is_cross_entropy(counts) -> None:
    # (n - n_t) / n_t + K = 10 makes every weight log10(10) = 1
    K = 10.0 - (sum(counts) - counts[0]) / counts[0]
    for layout, logits, target in batches():
        classes = 2 if layout == "binary" else 3
        if classes == len(counts):
            wce, ce = build_loss("wce", K=K, class_counts=counts), build_loss("ce")
            x = logits.clone().requires_grad_(True)
            torch.testing.assert_close(wce(x, target), ce(x, target), rtol=1e-12, atol=0.0)
            torch.testing.assert_close(*(torch.autograd.grad(f(x, target), x)[0] for f in (wce, ce)))


@pytest.mark.parametrize("level", ["example", "batch"])
@pytest.mark.parametrize("smooth", [1.0, 0.3])
@pytest.mark.parametrize("class_reduction", ["mean", "sum"])
def test_tversky_with_halves_and_half_the_smoothing_is_dice_with_linear_denominator(
    level, smooth, class_reduction
):
    tversky = build_loss(
        "tversky", alpha=0.5, beta=0.5, smooth=smooth / 2, level=level, class_reduction=class_reduction
    )
    dice = build_loss(
        "dice", square_denominator=False, smooth=smooth, level=level, class_reduction=class_reduction
    )
    assert_same_loss(tversky, dice)


@pytest.mark.parametrize("square_denominator", [True, False])
@pytest.mark.parametrize("level", ["example", "batch"])
def test_dsc_with_alpha_0_is_dice(square_denominator, level) -> None:
    options = {"square_denominator": square_denominator, "level": level, "smooth": 0.7}
    assert_same_loss(build_loss("dsc", alpha=0.0, **options), build_loss("dice", **options))
