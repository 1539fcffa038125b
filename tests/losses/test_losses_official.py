"""dicelab reproduces the official ShannonAI implementation (github.com/ShannonAI/dice_loss_for_NLP,
loss/dice_loss.py and loss/focal_loss.py) where the README says it does.

The oracle below re-implements the official formulas literally (same operations, same reductions, without
the OHEM branch, which dicelab does not offer); it is test code, not shipped.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from dicelab.losses import build_loss


def official_dice(
    logits: Tensor,
    target: Tensor,
    *,
    smooth: float,
    square_denominator: bool,
    alpha: float,
    mask: Tensor | None = None,
) -> Tensor:
    """DiceLoss(with_logits=True, ohem_ratio=0, reduction="mean", index_label_position=True)."""

    def compute(flat_input: Tensor, flat_target: Tensor) -> Tensor:
        flat_input = ((1 - flat_input) ** alpha) * flat_input
        intersection = torch.sum(flat_input * flat_target, -1)
        if not square_denominator:
            return 1 - ((2 * intersection + smooth) / (flat_input.sum() + flat_target.sum() + smooth))
        return 1 - (
            (2 * intersection + smooth)
            / (torch.sum(torch.square(flat_input), -1) + torch.sum(torch.square(flat_target), -1) + smooth)
        )

    classes = logits.shape[-1]
    if classes == 1:  # the binary path: one set over the whole batch
        flat_input, flat_target = torch.sigmoid(logits.view(-1)), target.view(-1).float()
        if mask is not None:
            flat_input, flat_target = flat_input * mask, flat_target * mask
        return compute(flat_input, flat_target).mean()
    flat_input = torch.nn.Softmax(dim=1)(logits)
    flat_target = F.one_hot(target, num_classes=classes).float()
    loss = None
    for label_index in range(classes):  # one (N, 1) column per class, summed
        column = compute(flat_input[:, label_index].view(-1, 1), flat_target[:, label_index].view(-1, 1))
        loss = column if loss is None else loss + column
    return loss.mean()


def official_focal(
    logits: Tensor, target: Tensor, *, gamma: float, alpha: list[float] | None = None
) -> Tensor:
    """FocalLoss(gamma, alpha, reduction="mean")."""
    target = target.unsqueeze(-1)
    pt = F.softmax(logits, dim=-1).gather(1, target).squeeze(-1)
    logpt = F.log_softmax(logits, dim=-1).gather(1, target).squeeze(-1)
    if alpha is not None:
        logpt = logpt * torch.tensor(alpha, dtype=logits.dtype).gather(0, target.squeeze(-1))
    return (-1 * (1 - pt) ** gamma * logpt).mean()


def value_and_gradient(loss_fn, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    logits = logits.clone().requires_grad_(True)
    value = loss_fn(logits, target)
    return value, torch.autograd.grad(value, logits)[0]


def batch(classes: int, n: int = 16, seed: int = 0) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(n, classes, generator=generator, dtype=torch.float64)
    return logits, torch.randint(0, max(classes, 2), (n,), generator=generator)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 1.0, 2.0])
@pytest.mark.parametrize("square_denominator", [False, True])
@pytest.mark.parametrize("smooth", [1e-4, 1.0])
def test_binary_path_is_dsc_at_batch_level(alpha, square_denominator, smooth) -> None:
    logits, target = batch(1)
    options = {"smooth": smooth, "square_denominator": square_denominator, "alpha": alpha}
    ours = build_loss("dsc", level="batch", **options)
    torch.testing.assert_close(
        value_and_gradient(ours, logits, target),
        value_and_gradient(lambda x, t: official_dice(x, t, **options), logits, target),
    )


def test_binary_path_mask_is_ignore_index() -> None:
    logits, target = batch(1)
    mask = (torch.arange(16) % 3 != 0).double()
    options = {"smooth": 1.0, "square_denominator": False, "alpha": 0.3}
    ours = build_loss("dsc", level="batch", **options)
    ignored = torch.where(mask > 0, target, -100)
    torch.testing.assert_close(
        value_and_gradient(ours, logits, ignored),
        value_and_gradient(lambda x, t: official_dice(x, t, mask=mask, **options), logits, target),
    )


@pytest.mark.parametrize("alpha", [0.0, 0.01, 1.0])
@pytest.mark.parametrize("classes", [2, 5])
def test_multi_class_path_with_square_denominator_is_dsc_per_example_summed_over_classes(alpha, classes):
    logits, target = batch(classes)
    ours = build_loss(
        "dsc", alpha=alpha, smooth=1.0, square_denominator=True, level="example", class_reduction="sum"
    )
    official = lambda x, t: official_dice(x, t, smooth=1.0, square_denominator=True, alpha=alpha)  # noqa: E731
    torch.testing.assert_close(
        value_and_gradient(ours, logits, target), value_and_gradient(official, logits, target)
    )


def test_multi_class_path_without_square_denominator_mixes_levels() -> None:
    """Documented difference: there the numerator is per example but `flat_input.sum()` in the denominator
    runs over the whole batch, a form that is neither the paper's per-example nor its set-level dice."""
    logits, target = batch(3, seed=2)
    official = official_dice(logits, target, smooth=1.0, square_denominator=False, alpha=0.0)
    p, y = torch.softmax(logits, -1), F.one_hot(target, 3).double()
    mixed = (1 - (2 * p * y + 1.0) / (p.sum(0) + y.sum(0) + 1.0)).sum(-1).mean()
    torch.testing.assert_close(official, mixed)
    for level in ("example", "batch"):
        ours = build_loss("dice", smooth=1.0, square_denominator=False, level=level, class_reduction="sum")
        assert not torch.isclose(ours(logits, target), official)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0])
@pytest.mark.parametrize("alpha", [None, [0.1, 0.3, 0.6]])
def test_focal_loss_with_mean_reduction_is_focal(gamma, alpha) -> None:
    logits, target = batch(3)
    ours = build_loss("focal", gamma=gamma, alpha=alpha)
    official = lambda x, t: official_focal(x, t, gamma=gamma, alpha=alpha)  # noqa: E731
    torch.testing.assert_close(
        value_and_gradient(ours, logits, target), value_and_gradient(official, logits, target)
    )


@pytest.mark.parametrize("alpha", [0.01, 0.5])
def test_official_code_gives_nan_gradients_at_saturated_probabilities_where_dicelab_does_not(alpha) -> None:
    logits = torch.tensor([[100.0], [-100.0], [30.0], [-2.0]])  # sigmoid(100) rounds to 1 in float32
    target = torch.tensor([1, 0, 1, 1])
    official = value_and_gradient(
        lambda x, t: official_dice(x, t, smooth=1.0, square_denominator=False, alpha=alpha), logits, target
    )
    assert torch.isnan(official[1]).any()
    ours = value_and_gradient(build_loss("dsc", alpha=alpha, level="batch"), logits, target)
    assert torch.isfinite(ours[0]) and torch.isfinite(ours[1]).all()
    # The values differ too: once p rounds to 1 the official (1 - p)^alpha is 0, while dicelab's
    # exp(alpha log(1 - p)) keeps e^(-100 alpha), 0.37 for alpha = 0.01.
    softmax_logits = torch.tensor([[100.0, -100.0, 0.0], [0.0, 3.0, -1.0]])
    softmax_target = torch.tensor([0, 1])
    official = value_and_gradient(
        lambda x, t: official_focal(x, t, gamma=alpha), softmax_logits, softmax_target
    )
    assert torch.isnan(official[1]).any()
    ours = value_and_gradient(build_loss("focal", gamma=alpha), softmax_logits, softmax_target)
    assert torch.isfinite(ours[1]).all()
