"""Loss values worked out by hand for tiny inputs, every loss and mode.

Binary batch: logits ln 3, -ln 3 (p = 3/4, 1/4) with targets 1, 0, plus an ignored position.
Softmax batch: p = (1/4, 1/4, 1/2) with target 2 and p = (1/2, 1/4, 1/4) with target 1, plus an ignored row.
"""

from __future__ import annotations

import math

import pytest
import torch

from dicelab.losses import build_loss, wce_class_weights

LN3, LN2 = math.log(3.0), math.log(2.0)
BINARY = (torch.tensor([LN3, -LN3, 7.0], dtype=torch.float64), torch.tensor([1, 0, -100]))
SOFTMAX = (
    torch.tensor([[0.0, 0.0, LN2], [LN2, 0.0, 0.0], [5.0, -5.0, 0.0]], dtype=torch.float64),
    torch.tensor([2, 1, -100]),
)
CE_34 = -math.log(0.75)  # -ln(3/4): both binary positions have p_t = 3/4

CASES = [
    # binary
    ("ce", {}, BINARY, CE_34),
    ("wce", {"K": 1.0, "class_counts": [3, 1]}, BINARY, CE_34 * (math.log10(4 / 3) + math.log10(4)) / 2),
    ("focal", {"gamma": 2.0}, BINARY, 0.25**2 * CE_34),
    ("focal", {"gamma": 2.0, "alpha": 0.25}, BINARY, (0.25 + 0.75) * 0.25**2 * CE_34 / 2),
    # dice, per example: (1 - 2.5/2.5625) and (1 - 1/1.0625); k = 1: (1 - 2.5/2.75) and (1 - 1/1.25)
    ("dice", {}, BINARY, ((1 - 2.5 / 2.5625) + (1 - 1 / 1.0625)) / 2),
    ("dice", {"square_denominator": False}, BINARY, ((1 - 2.5 / 2.75) + (1 - 1 / 1.25)) / 2),
    # set level: 2 TP = 1.5, sum p = 1, sum p^2 = 0.625, sum y = 1
    ("dice", {"level": "batch", "square_denominator": False}, BINARY, 1 - 2.5 / 3),
    ("dice", {"level": "batch"}, BINARY, 1 - 2.5 / 2.625),
    ("dice", {"level": "batch", "smooth": 0.0}, BINARY, 1 - 1.5 / 1.625),
    # tversky 0.3 / 0.7: TP = 3/4 and FN = 1/4 (positive), FP = 1/4 (negative)
    ("tversky", {"alpha": 0.3, "beta": 0.7}, BINARY, ((1 - 1.75 / 1.925) + (1 - 1 / 1.075)) / 2),
    ("tversky", {"alpha": 0.3, "beta": 0.7, "level": "batch"}, BINARY, 1 - 1.75 / 2.0),
    # dsc alpha = 1: q = p (1 - p) = 3/16 for both positions
    ("dsc", {}, BINARY, ((1 - 1.375 / 2.1875) + (1 - 1 / 1.1875)) / 2),
    # dsc alpha = 2, set level, squared, smooth 1/2: q = 3/64 (y = 1) and 9/64 (y = 0)
    (
        "dsc",
        {"alpha": 2.0, "level": "batch", "square_denominator": True, "smooth": 0.5},
        BINARY,
        1 - (2 * 3 / 64 + 0.5) / ((3 / 64) ** 2 + (9 / 64) ** 2 + 1 + 0.5),
    ),
    # softmax
    ("ce", {}, SOFTMAX, 1.5 * LN2),  # -(ln 1/2 + ln 1/4) / 2
    (
        "wce",
        {"K": 1.0, "class_counts": [2, 1, 1]},
        SOFTMAX,
        1.5 * math.log10(4) * LN2,
    ),  # weights log10 2, 4, 4
    ("focal", {"gamma": 1.0}, SOFTMAX, LN2),  # ((1/2) ln 2 + (3/4) 2 ln 2) / 2
    (
        "focal",
        {"gamma": 1.0, "alpha": [0.2, 0.3, 0.5]},
        SOFTMAX,
        0.35 * LN2,
    ),  # (1/2 (1/2) + 3/10 (3/2)) ln 2 / 2
    # dice per example and class: 1/17, 1/17, 1/9 (row 1), 1/5, 3/11, 1/17 (row 2)
    ("dice", {}, SOFTMAX, (3 / 17 + 1 / 9 + 1 / 5 + 3 / 11) / 6),
    ("dice", {"class_reduction": "sum"}, SOFTMAX, (3 / 17 + 1 / 9 + 1 / 5 + 3 / 11) / 2),
    # dice per class over the batch, k = 1: (2 TP, sum p + sum y) = (0, 3/4), (1/2, 3/2), (1, 7/4)
    (
        "dice",
        {"level": "batch", "square_denominator": False, "class_reduction": "sum"},
        SOFTMAX,
        (1 - 1 / 1.75) + (1 - 1.5 / 2.5) + (1 - 2 / 2.75),
    ),
    # tversky per class over the batch: (TP, FP, FN) = (0, 3/4, 0), (1/4, 1/4, 3/4), (1/2, 1/4, 1/2)
    (
        "tversky",
        {"alpha": 0.3, "beta": 0.7, "level": "batch"},
        SOFTMAX,
        ((1 - 1 / 1.225) + (1 - 1.25 / 1.85) + (1 - 1.5 / 1.925)) / 3,
    ),
    # dsc alpha = 1 with the official multi-class settings: q = 3/16 where p = 1/4, 1/4 where p = 1/2
    (
        "dsc",
        {"square_denominator": True, "class_reduction": "sum"},
        SOFTMAX,
        (
            2 * (1 - 1 / (1 + (3 / 16) ** 2))  # row 1, classes 0 and 1
            + (1 - 1.5 / 2.0625)  # row 1, class 2 (target)
            + (1 - 1 / 1.0625)  # row 2, class 0
            + (1 - 1.375 / (2 + (3 / 16) ** 2))  # row 2, class 1 (target)
            + (1 - 1 / (1 + (3 / 16) ** 2))  # row 2, class 2
        )
        / 2,
    ),
]


@pytest.mark.parametrize(("name", "params", "batch", "expected"), CASES)
def test_known_value(name, params, batch, expected) -> None:
    logits, target = batch
    value = build_loss(name, **params)(logits.double(), target)
    assert value.item() == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_known_gradient_of_binary_cross_entropy_and_set_level_dice() -> None:
    logits = BINARY[0].double().requires_grad_(True)
    build_loss("ce")(logits, BINARY[1]).backward()
    # (p - y) / N per kept position, 0 for the ignored one
    torch.testing.assert_close(logits.grad, torch.tensor([-0.125, 0.125, 0.0], dtype=torch.float64))
    logits.grad = None
    build_loss("dice", level="batch", square_denominator=False)(logits, BINARY[1]).backward()
    # L = 1 - (2 TP + 1) / (P + Y + 1): dL/dp_i = -(2 y_i (P + Y + 1) - (2 TP + 1)) / (P + Y + 1)^2,
    # with P + Y + 1 = 3 and 2 TP + 1 = 2.5, times dp/dx = p (1 - p) = 3/16.
    expected = [-(2 * 3 - 2.5) / 9 * 3 / 16, 2.5 / 9 * 3 / 16, 0.0]
    torch.testing.assert_close(logits.grad, torch.tensor(expected, dtype=torch.float64))


def test_wce_class_weights_by_hand() -> None:
    # n = 100: log10(90/10 + 1) = 1 and log10(10/90 + 1) = log10(10/9)
    weights = wce_class_weights([10, 90], K=1.0)
    assert weights.dtype == torch.float64
    torch.testing.assert_close(weights, torch.tensor([1.0, math.log10(10 / 9)], dtype=torch.float64))
    # n = 4: log10(3/1 + 0.5) twice and log10(2/2 + 0.5)
    expected = torch.tensor([math.log10(3.5), math.log10(3.5), math.log10(1.5)], dtype=torch.float64)
    torch.testing.assert_close(wce_class_weights([1, 1, 2], K=0.5), expected)
