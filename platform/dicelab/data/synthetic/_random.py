"""Seeded random helpers shared by the generators (numpy Generator only, so a seed fixes the output)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def pick(rng: np.random.Generator, options: Sequence[T]) -> T:
    return options[int(rng.integers(len(options)))]


def exact_shuffled_flags(n: int, rate: float, rng: np.random.Generator) -> list[bool]:
    """`n` flags, exactly round(n * rate) of them True, in random order."""
    count = round(n * rate)
    flags = np.zeros(n, dtype=bool)
    flags[:count] = True
    return rng.permutation(flags).tolist()
