"""The six training losses of the paper: pure functions (`dicelab.losses.functional`), modules, a registry.

    loss = build_loss("dsc", alpha=0.5, level="batch")
    loss(logits, target)  # logits (N,) / (N, 1) binary, (N, C) or (B, L, C) softmax; a scalar tensor

Registered names: ce, wce, focal, dice, tversky, dsc (`LOSSES`, in `dicelab.losses.registry`). Adding a
loss is one module whose class extends `Loss` (`dicelab.losses.base`) and is decorated with
`@LOSSES.register(name)`, plus its import here: importing this package imports every loss module, so the
registry is complete.
"""

from dicelab.losses import functional
from dicelab.losses.base import Loss
from dicelab.losses.cross_entropy import CrossEntropyLoss, WeightedCrossEntropyLoss, wce_class_weights
from dicelab.losses.dice import DiceLoss, SelfAdjustingDiceLoss, TverskyLoss
from dicelab.losses.focal import FocalLoss
from dicelab.losses.registry import LOSSES, build_loss, validate_loss_params

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
