"""One pure function per loss: `f(logits, target, **params) -> scalar tensor` (see `dicelab.losses`).

`prepare` and `compute_precision` are what every loss here starts from, public for a plugin's own loss:
checked inputs of any accepted layout, flattened, without the positions whose target is `ignore_index`,
computed in float32 (float64 stays float64) with autocast off.
"""

from dicelab.losses._inputs import LossInputs, compute_precision, prepare
from dicelab.losses.cross_entropy import cross_entropy, weighted_cross_entropy
from dicelab.losses.dice import dice_loss, dsc_loss, tversky_loss
from dicelab.losses.focal import focal_loss

__all__ = [
    "LossInputs",
    "compute_precision",
    "cross_entropy",
    "dice_loss",
    "dsc_loss",
    "focal_loss",
    "prepare",
    "tversky_loss",
    "weighted_cross_entropy",
]
