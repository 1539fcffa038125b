"""The Table 8 presets: what each may do to each class, and the class counts it aims at.

Every target is computed from the input's own counts P (positives) and N (negatives), so a preset means
the same thing on full QQP, on a subset of it or on another dataset. `size` / `positive_rate` override
the preset's default; the result must still be reachable by the preset's own means (e.g. "-negative"
only removes negatives, so it can never grow the set).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dicelab.errors import ConfigError

Change = Literal["keep", "add", "drop"]


@dataclass(frozen=True)
class Preset:
    name: str
    positives: Change
    negatives: Change
    rule: str  # what the default target is, in words (goes into the manifest)
    default_counts: Callable[[int, int], tuple[int, int]]  # (P, N) -> (positives, negatives)


def _round(value: float) -> int:
    # Half-up rounding (Python's round() is half-to-even, which would surprise in a manifest).
    return int(value + 0.5)


def _keep_ratio_at_plus_positive_size(p: int, n: int) -> tuple[int, int]:
    size = 2 * n
    positives = _round(size * p / (p + n))
    return positives, size - positives


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset("original", "keep", "keep", "unchanged: P positives, N negatives", lambda p, n: (p, n)),
        Preset(
            "+positive",
            "add",
            "keep",
            "add N-P augmented positives: N positives, N negatives (balanced)",
            lambda p, n: (n, n),
        ),
        Preset(
            "+negative",
            "keep",
            "add",
            "add N-P augmented negatives (as many new pairs as +positive): P positives, 2N-P negatives",
            lambda p, n: (p, 2 * n - p),
        ),
        Preset(
            "-negative",
            "keep",
            "drop",
            "keep a random P of the N negatives: P positives, P negatives (balanced)",
            lambda p, n: (p, p),
        ),
        Preset(
            "+positive+negative",
            "add",
            "add",
            "add N-P augmented pairs split to keep the input's positive rate: size 2N at rate P/(P+N)",
            _keep_ratio_at_plus_positive_size,
        ),
    )
}
VARIANTS: tuple[str, ...] = tuple(PRESETS)  # original, +positive, +negative, -negative, +positive+negative


@dataclass(frozen=True)
class Target:
    positives: int
    negatives: int
    derived: str  # how the counts were obtained (preset rule or which override)

    @property
    def size(self) -> int:
        return self.positives + self.negatives

    @property
    def positive_rate(self) -> float:
        return self.positives / self.size


def get_preset(variant: str) -> Preset:
    try:
        return PRESETS[variant]
    except KeyError:
        raise ConfigError(f"unknown variant {variant!r} (allowed: {', '.join(VARIANTS)})") from None


def check_options(size: int | None, positive_rate: float | None) -> None:
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ConfigError(f"size must be a positive integer (got {size!r})")
    if positive_rate is not None and not 0.0 < positive_rate < 1.0:
        raise ConfigError(f"positive_rate must be strictly between 0 and 1 (got {positive_rate!r})")


def resolve_target(
    preset: Preset, p: int, n: int, size: int | None = None, positive_rate: float | None = None
) -> Target:
    """The class counts `preset` aims at for an input with `p` positives and `n` negatives."""
    check_options(size, positive_rate)
    if size is None and positive_rate is None:
        if p > n and preset.name != "original":
            raise ConfigError(
                f"variant {preset.name!r}: its default target is for inputs with fewer positives than "
                f"negatives; this one has {p} positives, {n} negatives ({p / (p + n):.1%} positive): "
                "give size and/or positive_rate"
            )
        positives, negatives = preset.default_counts(p, n)
        target = Target(positives, negatives, f"preset: {preset.rule}")
    elif size is not None and positive_rate is not None:
        positives = _round(size * positive_rate)
        target = Target(positives, size - positives, "size and positive_rate given")
    elif preset.positives == "keep":
        negatives = size - p if size is not None else _round(p * (1 - positive_rate) / positive_rate)
        target = Target(p, negatives, f"{_given(size)} given; the preset keeps the P positives")
    elif preset.negatives == "keep":
        positives = size - n if size is not None else _round(n * positive_rate / (1 - positive_rate))
        target = Target(positives, n, f"{_given(size)} given; the preset keeps the N negatives")
    else:  # both classes grow: the missing option comes from the preset's default
        default = Target(*preset.default_counts(p, n), "")
        total = size if size is not None else default.size
        rate = positive_rate if positive_rate is not None else default.positive_rate
        positives = _round(total * rate)
        target = Target(positives, total - positives, f"{_given(size)} given; the other from the preset")
    _check_reachable(preset, target, p, n, size, positive_rate)
    return target


def _given(size: int | None) -> str:
    return "size" if size is not None else "positive_rate"


def _check_reachable(
    preset: Preset, target: Target, p: int, n: int, size: int | None, positive_rate: float | None
) -> None:
    asked = ", ".join(
        f"{key}={value}"
        for key, value in (("size", size), ("positive_rate", positive_rate))
        if value is not None
    )
    for label, change, have, want in (
        ("positives", preset.positives, p, target.positives),
        ("negatives", preset.negatives, n, target.negatives),
    ):
        problem = None
        if want < 1:
            problem = f"the target has {want} {label}"
        elif change == "keep" and want != have:
            problem = f"it keeps the {have} {label} as they are, but the target needs {want}"
        elif change == "add" and want < have:
            problem = f"it can only add {label}, but the target needs {want} of the input's {have}"
        elif change == "drop" and want > have:
            problem = f"it can only remove {label}, but the target needs {want} of the input's {have}"
        if problem:
            given = f" ({asked})" if asked else " (its default target)"
            raise ConfigError(
                f"variant {preset.name!r}{given} cannot be built from an input with {p} positives and "
                f"{n} negatives: {problem}"
            )
