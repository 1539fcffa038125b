"""One pure function per loss: `f(logits, target, **params) -> scalar tensor` (see `dicelab.losses`)."""

from dicelab.losses.cross_entropy import cross_entropy, weighted_cross_entropy
from dicelab.losses.dice import dice_loss, dsc_loss, tversky_loss
from dicelab.losses.focal import focal_loss

__all__ = ["cross_entropy", "dice_loss", "dsc_loss", "focal_loss", "tversky_loss", "weighted_cross_entropy"]
