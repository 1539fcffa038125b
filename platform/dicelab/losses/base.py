"""The base class every registered loss extends (the registry is `dicelab.losses.registry`)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn

from dicelab.losses import _checks


class Loss(nn.Module):
    """A registered loss: keyword-only parameters checked on construction; `loss(logits, target)` is a scalar.

    Subclasses put the keyword arguments of their pure function in `self.options`; tensors that must follow
    the module across devices (class weights) are buffers instead.
    """

    def __init__(self, *, ignore_index: int = -100):
        super().__init__()
        self.options: dict[str, Any] = {"ignore_index": _checks.integer("ignore_index", ignore_index)}

    @classmethod
    def parameter_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return sorted(name for name, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY)

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        """Check parameters at config time, before any data is loaded: by default, build the loss."""
        cls(**params)

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={value!r}" for name, value in self.options.items())
