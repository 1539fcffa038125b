"""The loss registry, the base class every registered loss extends, and the two entry points that read
loss parameters from a config: `validate_loss_params` (config time) and `build_loss` (training time)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn

from dicelab.errors import ConfigError
from dicelab.losses import _checks
from dicelab.registry import Registry


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


LOSSES: Registry[type[Loss]] = Registry("loss")


def _loss_class(name: str, params: Mapping[str, Any]) -> type[Loss]:
    try:
        loss_class = LOSSES.get(name)
    except ValueError as error:  # "unknown loss 'foo' (allowed: ...)"
        raise ConfigError(str(error)) from None
    allowed = loss_class.parameter_names()
    for key in params:
        if key not in allowed:
            raise ConfigError(f"{key} is not a parameter of loss {name!r} (allowed: {', '.join(allowed)})")
    return loss_class


def build_loss(name: str, **params: Any) -> Loss:
    """The loss registered as `name`, e.g. `build_loss("tversky", alpha=0.3, beta=0.7)`.

    Bad names and parameters raise `ConfigError` (a ValueError) whose one-line message starts with the
    parameter's name, or reads "unknown loss ..." for an unknown name.
    """
    return _loss_class(name, params)(**params)


def validate_loss_params(name: str, params: Mapping[str, Any]) -> None:
    """Check a loss config exactly as `build_loss` would, without data: parameters that the trainer
    supplies from the training split (wce's `class_counts`) may be absent."""
    _loss_class(name, params).validate(params)
