"""The loss registry and the two entry points that read loss parameters from a config:
`validate_loss_params` (config time) and `build_loss` (training time).

Each loss module registers its classes with `@LOSSES.register(name)`; `dicelab.losses` imports every loss
module, so the registry is complete whenever this module is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dicelab.errors import ConfigError
from dicelab.losses.base import Loss
from dicelab.registry import Registry

LOSSES: Registry[type[Loss]] = Registry("loss", builtins="dicelab.losses")


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
