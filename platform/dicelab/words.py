"""Counts and values in words, as the console, run names and the report write them: "1 trial", "4 seeds",
"gamma=2.53318"."""

from __future__ import annotations

from typing import Any

import numpy as np


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def format_value(value: Any) -> str:
    """A value as text; a float to 6 significant digits (a sampled 2.533175598000681 is "2.53318")."""
    if isinstance(value, float | np.floating):
        return "n/a" if np.isnan(value) else f"{value:g}"
    return str(value)
