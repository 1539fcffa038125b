"""The six training losses of the paper: pure functions (`dicelab.losses.functional`), modules, a registry.

    loss = build_loss("dsc", alpha=0.5, level="batch")
    loss(logits, target)  # logits (N,) / (N, 1) binary, (N, C) or (B, L, C) softmax; a scalar tensor

Registered names: ce, wce, focal, dice, tversky, dsc (`LOSSES`). Adding a loss is one module whose class
extends `Loss` and is decorated with `@LOSSES.register(name)`, plus its module in `_LOSS_MODULES` and its
names in `_HOMES` here.

The names are imported on first use (PEP 562), every loss module with them so that `LOSSES` is complete:
`dicelab losses --help` imports `dicelab.losses.cli`, hence this package, and must not wait for torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dicelab.losses import functional
    from dicelab.losses.base import LOSSES, Loss, build_loss, validate_loss_params
    from dicelab.losses.cross_entropy import CrossEntropyLoss, WeightedCrossEntropyLoss, wce_class_weights
    from dicelab.losses.dice import DiceLoss, SelfAdjustingDiceLoss, TverskyLoss
    from dicelab.losses.focal import FocalLoss

__all__ = [
    "LOSSES",
    "CrossEntropyLoss",
    "DiceLoss",
    "FocalLoss",
    "Loss",
    "SelfAdjustingDiceLoss",
    "TverskyLoss",
    "WeightedCrossEntropyLoss",
    "build_loss",
    "functional",
    "validate_loss_params",
    "wce_class_weights",
]
_HOMES = {
    "LOSSES": "base",
    "Loss": "base",
    "build_loss": "base",
    "validate_loss_params": "base",
    "CrossEntropyLoss": "cross_entropy",
    "WeightedCrossEntropyLoss": "cross_entropy",
    "wce_class_weights": "cross_entropy",
    "DiceLoss": "dice",
    "SelfAdjustingDiceLoss": "dice",
    "TverskyLoss": "dice",
    "FocalLoss": "focal",
}
_LOSS_MODULES = ("cross_entropy", "dice", "focal")  # importing them registers the losses


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for module in _LOSS_MODULES:
        importlib.import_module(f"{__name__}.{module}")
    if name == "functional":
        return importlib.import_module(f"{__name__}.functional")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
