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
    from dicelab.losses._base import LOSSES, Loss, build_loss, validate_loss_params
    from dicelab.losses._cross_entropy import CrossEntropyLoss, WeightedCrossEntropyLoss, wce_class_weights
    from dicelab.losses._dice import DiceLoss, SelfAdjustingDiceLoss, TverskyLoss
    from dicelab.losses._focal import FocalLoss

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
    "LOSSES": "_base",
    "Loss": "_base",
    "build_loss": "_base",
    "validate_loss_params": "_base",
    "CrossEntropyLoss": "_cross_entropy",
    "WeightedCrossEntropyLoss": "_cross_entropy",
    "wce_class_weights": "_cross_entropy",
    "DiceLoss": "_dice",
    "SelfAdjustingDiceLoss": "_dice",
    "TverskyLoss": "_dice",
    "FocalLoss": "_focal",
}
_LOSS_MODULES = ("_cross_entropy", "_dice", "_focal")  # importing them registers the losses


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for module in _LOSS_MODULES:
        importlib.import_module(f"{__name__}.{module}")
    if name == "functional":
        return importlib.import_module(f"{__name__}.functional")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
