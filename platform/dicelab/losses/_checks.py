"""Checks of loss parameters. Every message is one line and starts with the parameter's name,
so config validation can point at the offending `loss.<name>` key."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dicelab.errors import ConfigError

LEVELS = ("example", "batch")
CLASS_REDUCTIONS = ("mean", "sum")


def number(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> float:
    """A finite real number; `minimum` and `maximum` are inclusive bounds, `above` an exclusive one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    value = float(value)
    if (
        (minimum is not None and value < minimum)
        or (above is not None and value <= above)
        or (maximum is not None and value > maximum)
    ):
        low = f"[{minimum:g}" if minimum is not None else f"({above:g}" if above is not None else "(-inf"
        high = f"{maximum:g}]" if maximum is not None else "inf)"
        raise ConfigError(f"{name} must be in {low}, {high}, got {value:g}")
    return value


def integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    return value


def choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def numbers(
    name: str, value: Any, *, minimum: float | None = None, above: float | None = None, min_length: int = 1
) -> tuple[float, ...]:
    """A list (or array / tensor) of finite numbers, each checked like `number`."""
    if hasattr(value, "tolist"):  # numpy arrays and tensors
        value = value.tolist()
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) < min_length:
        raise ConfigError(f"{name} must be a list of at least {min_length} numbers, got {value!r}")
    checked = []
    for index, entry in enumerate(value):
        try:
            checked.append(number(name, entry, minimum=minimum, above=above))
        except ConfigError as error:
            raise ConfigError(f"{error} (entry {index})") from None
    return tuple(checked)
